// Command demo brings up a local simulated cluster (real control plane built
// from source, kwok nodes), installs Runbook's CRDs, runs the manager against
// it, applies config/samples and waits for Ctrl-C, then tears it all down.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of fake nodes")
	samples := flag.Bool("samples", true, "apply config/samples after the manager is ready")
	exitAfterReady := flag.Bool("exit-after-ready", false, "tear down as soon as everything is ready (smoke test)")
	flag.Parse()
	if err := run(*nodes, *samples, *exitAfterReady); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo is one run: where the repository is and how to report progress.
type demo struct {
	root  string
	start time.Time
}

func (d *demo) say(format string, args ...any) {
	fmt.Printf("==> [%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(nodes int, applySamples, exitAfterReady bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{root: testenv.RepoRoot(), start: time.Now()}
	d.say("building the manager (go build ./cmd)")
	bin, err := cluster.BuildManager(ctx, filepath.Join(d.root, "bin"))
	if err != nil {
		return err
	}
	d.say("starting a local cluster: etcd, kube-apiserver, controller-manager, scheduler, %d kwok nodes (~15 s)", nodes)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: nodes, NamePrefix: "runbook-demo"})
	if err != nil {
		return err
	}
	defer func() {
		d.say("tearing the cluster down")
		c.Stop()
		d.say("done: cluster processes stopped and its work directory removed")
	}()
	if err := d.prepare(ctx, c); err != nil {
		return err
	}
	m, err := d.startManager(ctx, c, bin)
	if err != nil {
		return err
	}
	defer func() {
		d.say("stopping the manager (SIGTERM)")
		if err := m.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	if applySamples {
		if err := d.applySamples(ctx, c); err != nil {
			return err
		}
	}
	printTryIt(c.Kubeconfig)
	if exitAfterReady {
		return nil
	}
	return streamLogs(ctx, m)
}

// prepare installs the CRDs and the manager's own namespace (it holds the
// fingerprint key).
func (d *demo) prepare(ctx context.Context, c *cluster.Cluster) error {
	d.say("installing CRDs")
	out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(d.root, "config", "crd", "bases"))
	if err != nil {
		return err
	}
	fmt.Print(out)
	_, err = c.Kubectl(ctx, "create", "namespace", "runbook-system")
	return err
}

func (d *demo) startManager(ctx context.Context, c *cluster.Cluster, bin string) (*cluster.Manager, error) {
	d.say("starting the manager (all controllers; probes may reach this machine's MariaDB and PostgreSQL, nothing else on loopback)")
	m, err := cluster.StartManager(ctx, bin, c.Kubeconfig,
		"--exec-probe-dir", filepath.Join(d.root, "hack", "demo", "probes"),
		"--operator-namespace", "runbook-system",
		"--probe-allow", "127.0.0.1:3306,127.0.0.1:5432")
	if err != nil {
		return nil, err
	}
	d.say("manager ready: %s/readyz answers 200", m.HealthURL)
	return m, nil
}

func (d *demo) applySamples(ctx context.Context, c *cluster.Cluster) error {
	d.say("applying demo workloads (proj-a, proj-b, proj-c) and config/samples")
	for _, args := range [][]string{
		{"-f", filepath.Join(d.root, "hack", "demo", "workloads.yaml")},
		{"-k", filepath.Join(d.root, "config", "samples")},
	} {
		out, err := c.Kubectl(ctx, append([]string{"apply", "--server-side"}, args...)...)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	return nil
}

func printTryIt(kubeconfig string) {
	kubectl := filepath.Join(testenv.BinDir(), "kubectl")
	fmt.Printf(`
Runbook is running against a local cluster.
  kubeconfig: %[1]s
Try:
  %[2]s --kubeconfig %[1]s get rebootpolicies,memcacheds,nsscalers -A
  %[2]s --kubeconfig %[1]s get deployments -n proj-a   # parked by the NSScaler: 0/0, original kept in an annotation
  %[2]s --kubeconfig %[1]s describe memcached -A
Manager logs stream below. Press Ctrl-C to stop and tear everything down.

`, kubeconfig, kubectl)
}

// streamLogs prints the manager's logs until Ctrl-C or the manager exits.
func streamLogs(ctx context.Context, m *cluster.Manager) error {
	logs := m.Logs()
	fmt.Print(logs)
	printed := len(logs)
	for {
		select {
		case <-ctx.Done():
			fmt.Println()
			return nil
		case <-m.Exited():
			return fmt.Errorf("manager exited unexpectedly:\n%s", m.Logs()[printed:])
		case <-time.After(time.Second):
			logs := m.Logs()
			fmt.Print(logs[printed:])
			printed = len(logs)
		}
	}
}
