package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func writeScript(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func TestResolveScript(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "scripts")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside, filepath.Join(dir, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(t, filepath.Join(dir, "ok.sh"), "exit 0", 0o755)
	writeScript(t, filepath.Join(dir, "sub", "nested.sh"), "exit 0", 0o755)
	writeScript(t, filepath.Join(dir, "noexec.sh"), "exit 0", 0o644)
	writeScript(t, filepath.Join(outside, "evil.sh"), "exit 0", 0o755)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(dir, "link-out.sh")))
	must(os.Symlink("ok.sh", filepath.Join(dir, "link-in.sh")))
	must(os.Symlink(outside, filepath.Join(dir, "dirlink")))
	must(os.Symlink("/bin/sh", filepath.Join(dir, "shell")))
	// The allowed directory itself reached through a symlink still works.
	must(os.Symlink(dir, filepath.Join(base, "scripts-link")))

	cases := []struct {
		name    string
		dir     string
		script  string
		wantErr string
	}{
		{"disabled when no directory is set", "", "ok.sh", "disabled"},
		{"relative name inside", dir, "ok.sh", ""},
		{"nested relative name", dir, "sub/nested.sh", ""},
		{"absolute path inside", dir, filepath.Join(dir, "ok.sh"), ""},
		{"symlink staying inside", dir, "link-in.sh", ""},
		{"directory given through a symlink", filepath.Join(base, "scripts-link"), "ok.sh", ""},
		{"traversal with ..", dir, "../outside/evil.sh", "outside"},
		{"traversal hidden in the middle", dir, "sub/../../outside/evil.sh", "outside"},
		{"absolute path outside", dir, filepath.Join(outside, "evil.sh"), "outside"},
		{"system binary", dir, "/bin/sh", "outside"},
		{"symlink pointing outside", dir, "link-out.sh", "outside"},
		{"symlink to a system shell", dir, "shell", "outside"},
		{"through a symlinked directory", dir, "dirlink/evil.sh", "outside"},
		{"the directory itself", dir, ".", "outside"},
		{"missing script", dir, "nope.sh", "not found"},
		{"not executable", dir, "noexec.sh", "not executable"},
		{"a directory, not a file", dir, "sub", "not a regular file"},
		{"empty command", dir, "", "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveScript(tc.dir, tc.script)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ResolveScript: %v", err)
				}
				realDir, _ := filepath.EvalSymlinks(dir)
				if !strings.HasPrefix(got, realDir+string(filepath.Separator)) {
					t.Fatalf("resolved %q outside %q", got, realDir)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to mention %q (resolved %q)", err, tc.wantErr, got)
			}
		})
	}
}

func TestExecProberRefusesWithoutDirectory(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	p := newExecProber(Settings{}, []string{"/bin/sh", "-c", "touch " + marker})
	o := p.Probe(context.Background())
	if o.Result != autorebootv1alpha1.ResultError || o.Reason != autorebootv1alpha1.ReasonExecNotAllowed {
		t.Fatalf("Observation = %+v, want ExecNotAllowed error", o)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a command ran although exec probes are disabled")
	}
}

func TestExecProberResults(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "ok.sh"), "echo fine; exit 0", 0o755)
	writeScript(t, filepath.Join(dir, "fail.sh"), "echo broken >&2; exit 3", 0o755)
	writeScript(t, filepath.Join(dir, "args.sh"), `[ "$1" = "x" ]`, 0o755)
	settings := Settings{ExecProbeDir: dir, ExecOutputLimit: 4096}
	cases := []struct {
		cmd     []string
		want    string
		message string
	}{
		{[]string{"ok.sh"}, ok, ""},
		{[]string{"fail.sh"}, fail, "exec probe failed: exit code 3"},
		{[]string{"args.sh", "x"}, ok, ""},
		{[]string{"args.sh", "y"}, fail, "exit code 1"},
		{[]string{strings.Repeat("../", 30) + "bin/true"}, errR, "outside"},
	}
	for _, tc := range cases {
		o := newExecProber(settings, tc.cmd).Probe(context.Background())
		if o.Result != tc.want || !strings.Contains(o.Message, tc.message) {
			t.Errorf("%v: %+v, want %s with %q", tc.cmd, o, tc.want, tc.message)
		}
	}
}

func TestExecOutputIsCapped(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "loud.sh"), "head -c 100000 /dev/zero | tr '\\0' a", 0o755)
	res := runScript(context.Background(), filepath.Join(dir, "loud.sh"), nil, dir, 100)
	if res.err != nil {
		t.Fatalf("run: %v", res.err)
	}
	if len(res.output) != 100 {
		t.Fatalf("kept %d bytes of output, want 100", len(res.output))
	}
}

// processGone reports whether pid has exited (gone or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the ")" that ends the command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The script starts a grandchild that would outlive a plain kill of
	// the script's own pid.
	writeScript(t, filepath.Join(dir, "hang.sh"), "sleep 300 &\necho $! > "+pidFile+"\nwait", 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	o := newExecProber(Settings{ExecProbeDir: dir, ExecOutputLimit: 1024}, []string{"hang.sh"}).Probe(ctx)
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Fatalf("probe returned after %s, timeout not enforced", elapsed)
	}
	if o.Result != fail || !strings.Contains(o.Message, "timed out") {
		t.Fatalf("Observation = %+v, want a timeout failure", o)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("grandchild pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecFailureKeepsTheOutputOutOfTheMessage: the tenant chooses the
// arguments of an allowed script, so whatever the script prints (its
// arguments, files it read for them) must not reach the message that goes
// to status and events; it goes only to the manager's log at V(1).
func TestExecFailureKeepsTheOutputOutOfTheMessage(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, filepath.Join(dir, "echo.sh"), `echo "out:$1"; echo "err:$1" >&2; exit 7`, 0o755)
	settings := Settings{ExecProbeDir: dir, ExecOutputLimit: 4096}
	const secret = "tenant-chosen-s3cr3t"
	var debug, info strings.Builder
	for _, c := range []struct {
		verbosity int
		into      *strings.Builder
	}{{1, &debug}, {0, &info}} {
		logger := funcr.New(func(prefix, args string) { c.into.WriteString(args + "\n") }, funcr.Options{Verbosity: c.verbosity})
		o := newExecProber(settings, []string{"echo.sh", secret}).Probe(logr.NewContext(context.Background(), logger))
		if o.Result != fail {
			t.Fatalf("Observation = %+v, want a failure", o)
		}
		if o.Message != "exec probe failed: exit code 7" {
			t.Errorf("message = %q, want only the fixed phrase and the exit code", o.Message)
		}
	}
	if !strings.Contains(debug.String(), "out:"+secret) || !strings.Contains(debug.String(), "err:"+secret) {
		t.Errorf("the V(1) log lacks the script's output: %q", debug.String())
	}
	if strings.Contains(info.String(), secret) {
		t.Errorf("the output reached the log below V(1): %q", info.String())
	}
}

// TestExecRefusalIsNoFileOracle: a name outside the directory is refused
// with the same words whether or not it exists on the manager's file
// system, so a tenant cannot map the manager's files through status.
func TestExecRefusalIsNoFileOracle(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(t.TempDir(), "present.sh")
	writeScript(t, existing, "exit 0", 0o755)
	missing := filepath.Join(filepath.Dir(existing), "absent.sh")
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, pair := range [][2]string{{existing, missing}, {rel(existing), rel(missing)}} {
		_, errPresent := ResolveScript(dir, pair[0])
		_, errAbsent := ResolveScript(dir, pair[1])
		if errPresent == nil || errAbsent == nil {
			t.Fatalf("accepted a script outside the directory: %v / %v", errPresent, errAbsent)
		}
		strip := func(err error, name string) string { return strings.ReplaceAll(err.Error(), name, "NAME") }
		if a, b := strip(errPresent, pair[0]), strip(errAbsent, pair[1]); a != b {
			t.Errorf("an existing file and a missing one outside the directory are told apart:\n%s\n%s", a, b)
		}
	}
}
