package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
)

// Everything one demo run starts carries its run directory on its command
// line: the cluster's components (their binaries, certificates and
// kubeconfig live under it, because the demo points TMPDIR there before the
// cluster is created), the manager (--kubeconfig) and the watchdog. That is
// how a later demo, or the watchdog, finds what a run left behind.

// state is the demo's state file (state.json in the state directory).
type state struct {
	DemoPID     int    `json:"demoPID"`
	WatchdogPID int    `json:"watchdogPID"`
	ManagerPID  int    `json:"managerPID,omitempty"`
	RunDir      string `json:"runDir"`
	Kubeconfig  string `json:"kubeconfig,omitempty"`
	Started     string `json:"started"`
}

func statePath(stateDir string) string { return filepath.Join(stateDir, "state.json") }

func readState(stateDir string) (*state, error) {
	b, err := os.ReadFile(statePath(stateDir))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(stateDir), err)
	}
	return &s, nil
}

func writeState(stateDir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(stateDir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(stateDir))
}

// isDemo reports whether pid is a running demo process (not a zombie, and
// its executable is this program's).
func isDemo(pid int) bool {
	if pid <= 0 || !alive(pid) {
		return false
	}
	self, err1 := os.Executable()
	exe, err2 := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err1 == nil && err2 == nil && filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == filepath.Base(self)
}

func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// cleanLeftovers stops what an earlier run in stateDir left running (a
// crash, a SIGKILL, a reboot of the watchdog too) and removes its files. It
// refuses while that earlier demo is still running.
func cleanLeftovers(stateDir string, out io.Writer) error {
	if s, err := readState(stateDir); err == nil && s.DemoPID != os.Getpid() && isDemo(s.DemoPID) {
		return fmt.Errorf("a demo is already running (pid %d, started %s); stop it with Ctrl-C in its terminal or `kill %d`", s.DemoPID, s.Started, s.DemoPID)
	}
	runs, _ := filepath.Glob(filepath.Join(stateDir, "run-*"))
	for _, dir := range runs {
		n := stopProcesses(dir, 10*time.Second)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing %s: %w", dir, err)
		}
		if n > 0 {
			_, _ = fmt.Fprintf(out, "==> cleaned up %d process(es) a previous demo left running (%s)\n", n, dir)
		}
	}
	if err := os.Remove(statePath(stateDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stopProcesses sends SIGTERM to every process mentioning dir on its
// command line, SIGKILL to those still there after grace, and returns how
// many there were once they are gone. A killed process is not gone at once:
// one busy on disk (an apiserver on a loaded machine) dies only when it
// leaves the kernel, so the caller, about to start a new cluster on the
// same ports, waits for that too (at most killWait).
func stopProcesses(dir string, grace time.Duration) int {
	pids := cluster.ProcessesMentioning(dir, false)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	waitGone(pids, grace)
	for _, pid := range pids {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	waitGone(pids, killWait)
	return len(pids)
}

// killWait bounds the wait for SIGKILLed processes to be gone.
const killWait = 10 * time.Second

// waitGone waits until none of pids is alive, or for d.
func waitGone(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// watchdogArg marks the demo binary's watchdog mode: `demo -watchdog RUNDIR`.
const watchdogArg = "-watchdog"

// startWatchdog starts this binary again as the run's watchdog, in a
// session of its own (Ctrl-C in the terminal does not reach it). It blocks
// on a pipe whose only writer is this process: when the demo exits, however
// it exits, SIGKILL included, the kernel closes the pipe and the watchdog
// stops every process of the run and removes the run directory. After a
// clean teardown there is nothing left for it to do.
func startWatchdog(runDir, logPath string) (*exec.Cmd, *os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(self, watchdogArg, runDir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	_ = r.Close()
	return cmd, w, nil
}

// runWatchdog is the watchdog's main: wait for the demo to go, then clean
// up after it.
func runWatchdog(runDir string) {
	// Not the terminal's: SIGINT and SIGHUP are the demo's business.
	signalsIgnoredByWatchdog()
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	if _, err := os.Stat(runDir); errors.Is(err, os.ErrNotExist) {
		return // torn down cleanly
	}
	n := stopProcesses(runDir, 10*time.Second)
	_ = os.RemoveAll(runDir)
	stateDir := filepath.Dir(runDir)
	if s, err := readState(stateDir); err == nil && s.RunDir == runDir {
		_ = os.Remove(statePath(stateDir))
	}
	fmt.Printf("%s watchdog (pid %d): the demo exited without tearing down; stopped %d process(es) of %s\n",
		time.Now().Format(time.RFC3339), os.Getpid(), n, runDir)
}

func signalsIgnoredByWatchdog() {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTERM)
}
