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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
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

func signalsIgnoredByWatchdog() {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTERM)
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

func (d *demo) runPhases(ctx context.Context) error {
	d.say("building the manager and the kubectl-runbook plugin")
	bin, err := cluster.BuildManager(ctx, filepath.Join(d.root, "bin"))
	if err != nil {
		return err
	}
	if err := goBuild(ctx, d.root, filepath.Join(d.root, "bin", "kubectl-runbook"), "./cmd/kubectl-runbook"); err != nil {
		return err
	}
	if d.samples {
		d.say("creating test.demo_tbl in MariaDB (%s) for the seed demo's RebootPolicy", mariaDBAddr)
		if err := prepareDemoTable(ctx); err != nil {
			_, _ = fmt.Fprintf(d.out, "    warning: %v\n    the sql sample stays Degraded until MariaDB answers (.ci/run shows how to start it)\n", err)
		}
		d.say("creating the read-only login runbook_probe in PostgreSQL (%s) for the postgres sample", postgresAddr)
		if err := preparePostgresUser(ctx); err != nil {
			_, _ = fmt.Fprintf(d.out, "    warning: %v\n    the postgres sample stays Degraded until PostgreSQL answers\n", err)
		}
	}
	health, moved, err := startDemoHealthServer()
	if err != nil {
		return err
	}
	d.health = health
	d.atExit(health.Close)
	a := health.addrs
	if moved {
		d.say("%s, %s and %s are taken (another demo on this machine?): the probe sample's endpoints listen on free ports instead, and the sample is applied with them", healthHTTPAddr, healthTCPAddr, healthGRPCAddr)
	}
	d.say("health endpoints for the probe sample: http://%s/healthz, tcp %s, grpc %s", a.http, a.tcp, a.grpc)

	real, why := d.realNodeMode()
	if real {
		d.say("mode: real node: nginx runs real containers on this machine (%s)", why)
	} else {
		d.say("mode: kwok only: every pod is simulated (no real node: %s)", why)
	}
	d.say("starting a local cluster: etcd, kube-apiserver, controller-manager, scheduler, %d kwok nodes (~15 s)", d.nodes)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: d.nodes, NamePrefix: "runbook-demo", ForRealNode: real})
	if err != nil {
		return err
	}
	d.atExit(func() {
		d.say("tearing the cluster down")
		c.Stop()
	})
	var node *realnode.Node
	if real {
		if node, err = d.startRealNode(ctx, c); err != nil {
			return err
		}
	}
	d.state.Kubeconfig = c.Kubeconfig
	if err := writeState(d.stateDir, d.state); err != nil {
		return err
	}
	if err := d.prepare(ctx, c); err != nil {
		return err
	}
	m, err := d.startManager(ctx, c, bin)
	if err != nil {
		return err
	}
	managerLog, err := os.Create(filepath.Join(d.stateDir, "manager.log"))
	if err != nil {
		return err
	}
	d.atExit(func() {
		d.say("stopping the manager (SIGTERM)")
		if err := m.Stop(); err != nil {
			_, _ = fmt.Fprintln(d.out, "manager:", err)
		}
		_, _ = io.WriteString(managerLog, m.Logs()[written(managerLog):])
		_ = managerLog.Close()
	})
	d.state.ManagerPID = m.Pid()
	if err := writeState(d.stateDir, d.state); err != nil {
		return err
	}
	ready, total := 0, 0
	if d.samples {
		if err := d.applySamples(ctx, c); err != nil {
			return err
		}
		if node != nil {
			d.say("moving nginx to the real node (the web image: %s)", node.Images["web"])
			if err := moveNginxToRealNode(ctx, c, node); err != nil {
				return err
			}
			out, _ := node.Crictl(ctx, "ps")
			d.say("nginx runs on the real node; its containers (crictl ps):\n%s", indent(out))
		}
		d.say("waiting for every sample to be Ready")
		if ready, total, err = waitSamplesReady(ctx, c.Config, d.out, d.readyTimeout); err != nil {
			return err
		}
		d.say("%d of %d samples Ready", ready, total)
		d.printStatus(ctx, c.Kubeconfig)
	}
	d.printTryIt(c.Kubeconfig, node != nil)
	if d.exitAfterReady {
		return nil
	}
	return d.streamLogs(ctx, m, managerLog)
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// prepare installs the CRDs and the manager's own namespace (it holds the
// fingerprint key).
func (d *demo) prepare(ctx context.Context, c *cluster.Cluster) error {
	d.say("installing CRDs")
	out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(d.root, "config", "crd", "bases"))
	if err != nil {
		return err
	}
	_, _ = fmt.Fprint(d.out, indent(out))
	if err := c.WaitCRDsEstablished(ctx, 120*time.Second); err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, "create", "namespace", "runbook-system")
	return err
}

func (d *demo) startManager(ctx context.Context, c *cluster.Cluster, bin string) (*cluster.Manager, error) {
	h := d.health.addrs
	allow := strings.Join([]string{"127.0.0.1:3306", "127.0.0.1:5432", h.http, h.tcp, h.grpc}, ",")
	d.say("starting the manager: all controllers, logs human-readable; probes may reach %s and nothing else on loopback", allow)
	m, err := cluster.StartManagerWith(ctx, d.spawner.start, bin, c.Kubeconfig,
		"--exec-probe-dir", filepath.Join(d.root, "hack", "demo", "probes"),
		"--operator-namespace", "runbook-system",
		"--probe-allow", allow,
		"--zap-encoder=console", "--zap-time-encoding=iso8601", "--zap-stacktrace-level=panic")
	if err != nil {
		return nil, err
	}
	d.say("manager ready: %s/readyz answers 200", m.HealthURL)
	return m, nil
}

func (d *demo) applySamples(ctx context.Context, c *cluster.Cluster) error {
	d.say("applying demo workloads (nginx's neighbour web, proj-a, proj-b, proj-c) and config/samples")
	samples, err := d.renderSamples(ctx, c)
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-f", filepath.Join(d.root, "hack", "demo", "workloads.yaml")},
		{"-f", samples},
	} {
		out, err := c.Kubectl(ctx, append([]string{"apply", "--server-side"}, args...)...)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprint(d.out, indent(out))
	}
	return nil
}

// printStatus shows the plugin's view of the demo: `kubectl runbook status -A`.
func (d *demo) printStatus(ctx context.Context, kubeconfig string) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "kubectl"), "runbook", "status", "-A")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(d.root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	_, _ = fmt.Fprintf(d.out, "\n$ kubectl runbook status -A\n%s", out)
	if err != nil {
		_, _ = fmt.Fprintf(d.out, "(kubectl runbook status: %v)\n", err)
	}
}

func (d *demo) printTryIt(kubeconfig string, real bool) {
	bin := filepath.Join(d.root, "bin")
	realLine := "Real containers:           none (kwok only: pods are simulated)"
	if real {
		realLine = "A real container's output: kubectl logs deployment/nginx   # nginx runs on node real-node: kubectl get pods -o wide"
	}
	_, _ = fmt.Fprintf(d.out, `
Runbook is running against a local cluster. In another terminal:

  export KUBECONFIG=%[1]s
  export PATH=%[2]s:%[3]s:$PATH     # kubectl, and the kubectl-runbook plugin

The seed demo: watch nginx, then change a row of demo_tbl; nginx restarts once (within 5 s):
  kubectl get pods -l app=nginx -w
  mariadb -h 127.0.0.1 -u root test -e "%[4]s"

What Runbook is doing:      kubectl runbook status -A
Make a probe fail:          curl -X POST http://%[5]s/fail/http   # or tcp, grpc; heal with /heal/http
                            (after failureThreshold failures in a row nginx restarts: kubectl get events -w)
Fire a policy by hand:      kubectl runbook restart nginx-on-demo-tbl --wait
Parked by the NSScaler:     kubectl get deployments -n proj-a   # 0/0, original in an annotation
Wake it for a while:        kubectl runbook wake proj-a --for 2h   # kubectl runbook park proj-a ends it
%[8]s
Logs: %[6]s (manager), %[7]s (this output)
Press Ctrl-C to stop and tear everything down.

`, kubeconfig, testenv.BinDir(), bin, demoUpdate, d.health.addrs.http, filepath.Join(d.stateDir, "manager.log"), filepath.Join(d.stateDir, "demo.log"), realLine)
}

// streamLogs copies the manager's logs to manager.log (and, with -logs, to
// the console) until Ctrl-C, a closed stdout or the manager's exit.
func (d *demo) streamLogs(ctx context.Context, m *cluster.Manager, file *os.File) error {
	if d.logs {
		_, _ = fmt.Fprintln(d.out, "Manager logs:")
	}
	printed := 0
	flush := func() {
		logs := m.Logs()
		_, _ = io.WriteString(file, logs[printed:])
		if d.logs {
			_, _ = fmt.Fprint(d.out, logs[printed:])
		}
		printed = len(logs)
	}
	for {
		flush()
		select {
		case <-ctx.Done():
			_, _ = fmt.Fprintln(d.out)
			return nil
		case <-m.Exited():
			flush()
			return errors.New("the manager exited unexpectedly; its logs are above and in manager.log")
		case <-time.After(time.Second):
		}
	}
}

// written is how much of the manager's log the file already holds.
func written(f *os.File) int {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return int(off)
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
