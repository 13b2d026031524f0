package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// demoProcess is the demo binary running with its stdout on a pipe the test
// reads line by line.
type demoProcess struct {
	cmd      *exec.Cmd
	stdout   *os.File // the test's (reading) end
	lines    chan string
	done     chan struct{}
	waitErr  error
	stateDir string
	seen     []string
}

func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/demo: %v\n%s", err, out)
	}
	return bin
}

func startDemo(t *testing.T, bin, stateDir string, args ...string) *demoProcess {
	t.Helper()
	return startInGroup(t, exec.Command(bin, append([]string{"-state-dir", stateDir}, args...)...), stateDir)
}

// startInGroup starts cmd (the demo, or `make demo` that runs it) with its
// output on a pipe the test reads; stateDir is where the demo keeps its state.
// When the test ends, whatever still runs of it is killed.
func startInGroup(t *testing.T, cmd *exec.Cmd, stateDir string) *demoProcess {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &demoProcess{cmd: cmd, stdout: r, lines: make(chan string, 1024), done: make(chan struct{}), stateDir: stateDir}
	d.cmd.Stdout, d.cmd.Stderr = w, w
	// Its own process group, as `make demo` in a terminal: Ctrl-C reaches
	// the demo and whatever it runs in the foreground.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close() // the demo holds the only write end
	go func() { d.waitErr = d.cmd.Wait(); close(d.done) }()
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			d.lines <- s.Text()
		}
		close(d.lines)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
		if st, err := readState(stateDir); err == nil {
			stopProcesses(st.RunDir, time.Second)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(stateDir, "demo.log"))
			t.Logf("demo.log:\n%s", log)
		}
	})
	return d
}

// waitLine reads the demo's output until a line matches re.
func (d *demoProcess) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				t.Fatalf("the demo's output ended before %q:\n%s", re, strings.Join(d.seen, "\n"))
			}
			d.seen = append(d.seen, l)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q within %s:\n%s", re, timeout, strings.Join(d.seen, "\n"))
		}
	}
}

func (d *demoProcess) waitExit(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-d.done:
		return d.waitErr
	case <-time.After(timeout):
		t.Fatalf("the demo did not exit within %s", timeout)
		return nil
	}
}

var readyLine = regexp.MustCompile(`Press Ctrl-C to stop and tear everything down`)

// runningState waits for the ready line and returns the run's state file.
func (d *demoProcess) runningState(t *testing.T) *state {
	t.Helper()
	d.waitLine(t, readyLine, 10*time.Minute)
	st, err := readState(d.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.ManagerPID == 0 || st.WatchdogPID == 0 || st.Kubeconfig == "" {
		t.Fatalf("state file incomplete: %+v", st)
	}
	if n := len(cluster.ProcessesMentioning(st.RunDir, false)); n < 6 {
		t.Fatalf("positive control: only %d processes mention %s while the demo runs; want the control plane, kwok, the manager and the watchdog", n, st.RunDir)
	}
	return st
}

// assertNothingSurvives waits (up to timeout, for a watchdog's cleanup)
// until no process of the run is left, then checks its files are gone.
func assertNothingSurvives(t *testing.T, st *state, timeout time.Duration) {
	t.Helper()
	var left []int
	if !poll(timeout, func() bool {
		left = cluster.ProcessesMentioning(st.RunDir, false)
		for _, pid := range []int{st.DemoPID, st.ManagerPID, st.WatchdogPID} {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		return len(left) == 0
	}) {
		t.Fatalf("processes of the run survive: %v", describe(left))
	}
	if _, err := os.Stat(st.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run directory %s is still there (%v)", st.RunDir, err)
	}
}

func describe(pids []int) []string {
	var out []string
	for _, pid := range pids {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, strconv.Itoa(pid)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// poll checks cond every 100 ms until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

// TestDemoStdoutClosedEarly is `make demo | head`, or `make demo | tee log`
// whose tee is gone: every sample gets Ready, the reader of the demo's
// stdout goes away, the demo tears everything down by itself — its writes
// to the closed pipe do not kill it (SIGPIPE) — and no process survives.
func TestDemoStdoutClosedEarly(t *testing.T) {
	testenv.SkipUnderShort(t, "a kwok cluster, MariaDB and PostgreSQL")
	bin := buildDemo(t)
	d := startDemo(t, bin, t.TempDir())
	m := d.waitLine(t, regexp.MustCompile(`(\d+) of (\d+) samples Ready`), 10*time.Minute)
	if want := strconv.Itoa(countSamples(t)); m[1] != m[2] || m[2] != want {
		t.Fatalf("%s of %s samples Ready, want all %s (config/samples)", m[1], m[2], want)
	}
	d.waitLine(t, regexp.MustCompile(`UPDATE demo_tbl SET name='ccc' WHERE id=1`), time.Minute)
	st := d.runningState(t)
	_ = d.stdout.Close()
	if err := d.waitExit(t, 3*time.Minute); err != nil {
		t.Fatalf("the demo exited with %v after its stdout was closed", err)
	}
	assertNothingSurvives(t, st, 0)
	log, _ := os.ReadFile(filepath.Join(d.stateDir, "demo.log"))
	for _, want := range []string{"stdout was closed: tearing down", "done: every process the demo started has stopped"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("demo.log lacks %q", want)
		}
	}
}

// TestDemoCtrlCWithClosedStdout is Ctrl-C on `make demo 2>&1 | tee demo.log`:
// SIGINT reaches the demo's process group and tee dies with it, so every
// line the demo writes while it tears down goes to a closed pipe.
func TestDemoCtrlCWithClosedStdout(t *testing.T) {
	testenv.SkipUnderShort(t, "a kwok cluster")
	bin := buildDemo(t)
	d := startDemo(t, bin, t.TempDir(), "-samples=false")
	st := d.runningState(t)
	_ = d.stdout.Close()
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := d.waitExit(t, 3*time.Minute); err != nil {
		t.Fatalf("the demo exited with %v after Ctrl-C", err)
	}
	assertNothingSurvives(t, st, 0)
}

// TestDemoCrashCleanup: a SIGKILLed demo leaves nothing for long (its
// watchdog stops the run), and when the watchdog is killed too, the next
// demo stops what the first one left before it starts.
func TestDemoCrashCleanup(t *testing.T) {
	testenv.SkipUnderShort(t, "a kwok cluster")
	bin := buildDemo(t)
	stateDir := t.TempDir()

	t.Run("the watchdog stops a killed demo's processes", func(t *testing.T) {
		d := startDemo(t, bin, stateDir, "-samples=false")
		st := d.runningState(t)
		if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = d.waitExit(t, time.Minute)
		assertNothingSurvives(t, st, 2*time.Minute)
		if _, err := readState(stateDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the watchdog left the state file: %v", err)
		}
	})

	t.Run("a second demo cleans up after a first one killed with its watchdog", func(t *testing.T) {
		first := startDemo(t, bin, stateDir, "-samples=false")
		st := first.runningState(t)
		for _, pid := range []int{st.WatchdogPID, first.cmd.Process.Pid} {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		_ = first.waitExit(t, time.Minute)
		// The manager dies with the demo (its parent-death signal); the
		// cluster's components, daemonized by kwokctl, stay behind.
		if !poll(time.Minute, func() bool { return !alive(st.WatchdogPID) && !alive(st.ManagerPID) }) {
			t.Fatalf("still alive after the demo was killed: watchdog %v, manager %v", alive(st.WatchdogPID), alive(st.ManagerPID))
		}
		left := cluster.ProcessesMentioning(st.RunDir, false)
		if len(left) == 0 {
			t.Fatal("positive control: with demo and watchdog killed, the cluster's processes should still run")
		}

		second := startDemo(t, bin, stateDir, "-samples=false", "-exit-after-ready")
		m := second.waitLine(t, regexp.MustCompile(`cleaned up (\d+) process\(es\) a previous demo left running \((.*)\)`), 5*time.Minute)
		if m[2] != st.RunDir || m[1] != strconv.Itoa(len(left)) {
			t.Errorf("cleaned up %s processes of %s, want %d of %s", m[1], m[2], len(left), st.RunDir)
		}
		assertNothingSurvives(t, st, 0)
		kc := second.waitLine(t, regexp.MustCompile(`export KUBECONFIG=(\S+)`), 5*time.Minute)
		second.waitLine(t, readyLine, time.Minute)
		if err := second.waitExit(t, 3*time.Minute); err != nil {
			t.Fatalf("second demo: %v", err)
		}
		rel, err := filepath.Rel(stateDir, kc[1])
		if err != nil || !strings.HasPrefix(rel, "run-") {
			t.Fatalf("the second demo's kubeconfig %s is not in a run directory of %s", kc[1], stateDir)
		}
		run2 := filepath.Join(stateDir, strings.Split(rel, string(filepath.Separator))[0])
		assertNothingSurvives(t, &state{RunDir: run2}, 0)
	})
}

// countSamples counts the RebootPolicies, Memcacheds and NSScalers that
// config/samples/kustomization.yaml applies.
func countSamples(t *testing.T) int {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	kind := regexp.MustCompile(`(?m)^kind: (RebootPolicy|Memcached|NSScaler)$`)
	n := 0
	for _, r := range k.Resources {
		f, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		n += len(kind.FindAll(f, -1))
	}
	if n < 7 {
		t.Fatalf("positive control: config/samples should hold at least one sample per kind and trigger (7), found %d", n)
	}
	return n
}
