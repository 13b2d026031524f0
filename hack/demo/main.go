// Command demo brings up a local simulated cluster (real control plane built
// from source, kwok nodes), installs Runbook's CRDs, runs the manager against
// it, applies config/samples, waits until every sample is Ready and tells
// you what to try; Ctrl-C tears it all down.
//
// Whatever happens to it, nothing it started outlives it: it handles SIGPIPE
// (so a closed stdout, as with `make demo | tee log` and Ctrl-C, cannot kill
// it half-way through its teardown), tears down when its stdout's reader
// goes away, starts the manager with a parent-death signal (it dies with the
// demo), and a watchdog process stops the cluster of a demo that was killed.
// A second demo removes whatever an earlier one left (state in bin/demo:
// state.json names the pids and the run directory).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == watchdogArg {
		runWatchdog(os.Args[2])
		return
	}
	o := options{}
	flag.IntVar(&o.nodes, "nodes", 3, "number of fake nodes")
	flag.BoolVar(&o.samples, "samples", true, "apply config/samples after the manager is ready")
	flag.BoolVar(&o.exitAfterReady, "exit-after-ready", false, "tear down as soon as everything is ready (smoke test)")
	flag.BoolVar(&o.logs, "logs", true, "stream the manager's logs (human-readable) after the instructions; they are always written to <state-dir>/manager.log")
	flag.StringVar(&o.stateDir, "state-dir", filepath.Join(testenv.RepoRoot(), "bin", "demo"), "where the demo keeps its state, logs and the cluster of a run")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 4*time.Minute, "how long to wait for every sample to be Ready")
	flag.StringVar(&o.realNode, "real-node", "auto", "run nginx on a real node (containerd on this machine): auto (when the machine can), on, off")
	flag.Parse()
	// A write to a closed stdout returns EPIPE instead of killing the demo
	// in the middle of its teardown (Go exits on SIGPIPE from fd 1 or 2
	// unless the signal is handled). Handled, not ignored: the processes the
	// demo starts get SIGPIPE's default action as usual.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// The demo's own clients log nothing a user needs; without a logger
	// controller-runtime prints a stack trace into the demo's output.
	ctrllog.SetLogger(logr.Discard())
	if err := run(o); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type options struct {
	nodes                         int
	samples, exitAfterReady, logs bool
	stateDir                      string
	readyTimeout                  time.Duration
	realNode                      string
}

// demo is one run: where the repository is, where output goes, and what
// to tear down.
type demo struct {
	options
	root     string
	start    time.Time
	out      *console
	runDir   string
	state    *state
	spawner  *spawner
	health   *healthServer
	teardown []func()
}

func (d *demo) say(format string, args ...any) {
	_, _ = fmt.Fprintf(d.out, "==> [%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// atExit registers a teardown step; they run in reverse order.
func (d *demo) atExit(f func()) { d.teardown = append(d.teardown, f) }

func run(o options) error {
	// Handled for the demo's whole life, never reset: a Ctrl-C (or a
	// second one) during the teardown must not kill it half-way.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	d := &demo{options: o, root: testenv.RepoRoot(), start: time.Now(), spawner: newSpawner()}
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(o.stateDir, "demo.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	d.out = newConsole(os.Stdout, logFile)

	if err := cleanLeftovers(o.stateDir, d.out); err != nil {
		return err
	}
	if err := d.startRun(); err != nil {
		return err
	}
	defer d.tearDown()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.stopOn(sigs, cancel, logFile)
	err = d.runPhases(ctx)
	if ctx.Err() != nil {
		return nil // Ctrl-C, SIGTERM, SIGHUP or stdout gone: a normal stop
	}
	return err
}

// stopOn cancels the run on the first of a signal and a closed stdout;
// later signals only say that the teardown is under way.
func (d *demo) stopOn(sigs <-chan os.Signal, cancel context.CancelFunc, log io.Writer) {
	gone := d.out.Gone()
	stopping := false
	stop := func(why string) {
		if stopping {
			_, _ = fmt.Fprintf(d.out, "==> %s: still tearing down (if the demo is killed, its watchdog stops what is left)\n", why)
			return
		}
		stopping = true
		_, _ = fmt.Fprintf(log, "==> %s: tearing down\n", why)
		cancel()
	}
	for {
		select {
		case s := <-sigs:
			stop(s.String())
		case <-gone:
			gone = nil
			stop("stdout was closed")
		}
	}
}

// startRun makes the run directory, points TMPDIR at it (kwokctl's cluster
// directory, certificates and binaries land there), starts the watchdog and
// writes the state file.
func (d *demo) startRun() error {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	d.runDir = filepath.Join(d.stateDir, "run-"+hex.EncodeToString(id))
	if err := os.Mkdir(d.runDir, 0o755); err != nil {
		return err
	}
	if err := os.Setenv("TMPDIR", d.runDir); err != nil {
		return err
	}
	wd, pipe, err := startWatchdog(d.runDir, filepath.Join(d.stateDir, "watchdog.log"))
	if err != nil {
		_ = os.RemoveAll(d.runDir)
		return err
	}
	d.state = &state{DemoPID: os.Getpid(), WatchdogPID: wd.Process.Pid, RunDir: d.runDir, Started: d.start.Format(time.RFC3339)}
	d.atExit(func() {
		// The run directory is gone: closing the pipe lets the watchdog
		// exit with nothing to do.
		_ = pipe.Close()
		_ = wd.Wait()
	})
	d.atExit(func() {
		_ = os.RemoveAll(d.runDir)
		_ = os.Remove(statePath(d.stateDir))
	})
	return writeState(d.stateDir, d.state)
}

func (d *demo) tearDown() {
	for i := len(d.teardown) - 1; i >= 0; i-- {
		d.teardown[i]()
	}
	if left := cluster.ProcessesMentioning(d.runDir, false); len(left) > 0 {
		_, _ = fmt.Fprintf(d.out, "==> %d process(es) still running after the teardown (pids %v); the watchdog stops them\n", len(left), left)
	} else {
		d.say("done: every process the demo started has stopped and its files are removed")
	}
}
