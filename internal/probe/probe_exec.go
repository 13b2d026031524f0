package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// errExecDisabled: the manager runs without --exec-probe-dir.
var errExecDisabled = errors.New("exec probes are disabled: the manager was started without --exec-probe-dir")

// ResolveScript returns the real path of script when it is a regular,
// executable file inside dir, after resolving every symlink. Relative names
// are taken relative to dir. Anything else is refused: traversal ("../x"),
// absolute paths outside dir, and symlinks that lead out of dir.
func ResolveScript(dir, script string) (string, error) {
	if dir == "" {
		return "", errExecDisabled
	}
	if script == "" {
		return "", errors.New("exec probe: empty command")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("exec probe directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", fmt.Errorf("exec probe directory: %w", err)
	}
	p := script
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	// Refuse a name outside the directory before touching the file
	// system: "not found" for a missing file and "outside" for an existing
	// one would let a tenant map the manager's files through status.
	if !lexicallyWithin(p, root) && !lexicallyWithin(p, dir) {
		return "", fmt.Errorf("exec probe script %q resolves outside the allowed directory", script)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("exec probe script %q: not found in the allowed directory", script)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("exec probe script %q resolves outside the allowed directory", script)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("exec probe script %q: %w", script, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("exec probe script %q is not a regular file", script)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("exec probe script %q is not executable", script)
	}
	return real, nil
}

// lexicallyWithin reports whether the cleaned path p lies below dir,
// without resolving anything.
func lexicallyWithin(p, dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(abs, filepath.Clean(p))
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// execProber runs an allowed script in its own process group; exit code 0
// is a success. On timeout the whole group is killed.
type execProber struct {
	settings Settings
	command  []string
}

func newExecProber(settings Settings, command []string) *execProber {
	return &execProber{settings: settings, command: append([]string(nil), command...)}
}

func (p *execProber) Kind() string { return TypeExec }
func (p *execProber) Close()       {}

func (p *execProber) Probe(ctx context.Context) Observation {
	if len(p.command) == 0 {
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonExecNotAllowed, Message: "exec probe: empty command"}
	}
	// Resolve on every run: the directory's content may change.
	script, err := ResolveScript(p.settings.ExecProbeDir, p.command[0])
	if err != nil {
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonExecNotAllowed, Message: err.Error()}
	}
	res := runScript(ctx, script, p.command[1:], filepath.Dir(script), p.settings.ExecOutputLimit)
	if res.err != nil {
		// The tenant chose the arguments: what the script printed (or
		// why it could not run) is for the admin's debug log only, never
		// for status and events.
		log.FromContext(ctx).V(1).Info("exec probe failed", "script", filepath.Base(script),
			"exitCode", res.exitCode, "error", res.err.Error(), "output", res.output)
	}
	switch {
	case res.err != nil && res.timedOut:
		return Observation{Result: autorebootv1alpha1.ResultFailure, Message: "exec probe timed out; process group killed"}
	case res.err != nil && res.exitCode < 0:
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError, Message: "exec probe: the script could not run or did not exit"}
	case res.exitCode != 0:
		return Observation{Result: autorebootv1alpha1.ResultFailure, Message: fmt.Sprintf("exec probe failed: exit code %d", res.exitCode)}
	}
	return Observation{Result: autorebootv1alpha1.ResultSuccess}
}

type scriptResult struct {
	exitCode int
	output   string
	timedOut bool
	err      error
}

// runScript runs path with args until ctx ends. The child gets its own
// process group (Setpgid) and ctx's end kills the group, grandchildren
// included. Output beyond limit bytes is dropped.
func runScript(ctx context.Context, path string, args []string, dir string, limit int) scriptResult {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &cappedBuffer{limit: limit}
	cmd.Stdout, cmd.Stderr = out, out
	// If a grandchild keeps the pipes open after the group was killed,
	// Wait still returns.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return scriptResult{exitCode: -1, err: fmt.Errorf("start %s: %w", filepath.Base(path), err)}
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	killed := make(chan bool, 1)
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			killed <- true
		case <-done:
			killed <- false
		}
	}()
	err := cmd.Wait()
	close(done)
	timedOut := <-killed
	// Kill leftovers of the group even on a normal exit (daemonised
	// children must not outlive the probe).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	res := scriptResult{output: out.String(), timedOut: timedOut}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.exitCode = exitErr.ExitCode()
		res.err = err
	default:
		res.exitCode = -1
		res.err = err
	}
	if timedOut {
		res.err = fmt.Errorf("timed out: %w", ctx.Err())
	}
	return res
}

// cappedBuffer keeps the first limit bytes written to it.
type cappedBuffer struct {
	limit int
	buf   bytes.Buffer
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string { return c.buf.String() }
