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

func run(nodes int, applySamples, exitAfterReady bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := testenv.RepoRoot()
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("==> [%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	say("building the manager (go build ./cmd)")
	bin, err := cluster.BuildManager(ctx, filepath.Join(root, "bin"))
	if err != nil {
		return err
	}
	say("starting a local cluster: etcd, kube-apiserver, controller-manager, scheduler, %d kwok nodes (~15 s)", nodes)
	c, err := cluster.Start(ctx, cluster.Options{Nodes: nodes, NamePrefix: "runbook-demo"})
	if err != nil {
		return err
	}
	defer func() {
		say("tearing the cluster down")
		c.Stop()
		say("done: cluster processes stopped and its work directory removed")
	}()
	say("installing CRDs")
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(root, "config", "crd", "bases")); err != nil {
		return err
	} else {
		fmt.Print(out)
	}
	// The manager's own namespace holds its fingerprint key.
	if _, err := c.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		return err
	}
	say("starting the manager (all controllers; probes may reach this machine's MariaDB and PostgreSQL, nothing else on loopback)")
	m, err := cluster.StartManager(ctx, bin, c.Kubeconfig,
		"--exec-probe-dir", filepath.Join(root, "hack", "demo", "probes"),
		"--operator-namespace", "runbook-system",
		"--probe-allow", "127.0.0.1:3306,127.0.0.1:5432")
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the manager (SIGTERM)")
		if err := m.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	say("manager ready: %s/readyz answers 200", m.HealthURL)
	if applySamples {
		say("applying demo workloads (proj-a, proj-b, proj-c) and config/samples")
		for _, args := range [][]string{
			{"-f", filepath.Join(root, "hack", "demo", "workloads.yaml")},
			{"-k", filepath.Join(root, "config", "samples")},
		} {
			out, err := c.Kubectl(ctx, append([]string{"apply", "--server-side"}, args...)...)
			if err != nil {
				return err
			}
			fmt.Print(out)
		}
	}
	kubectl := filepath.Join(testenv.BinDir(), "kubectl")
	fmt.Printf(`
Runbook is running against a local cluster.
  kubeconfig: %[1]s
Try:
  %[2]s --kubeconfig %[1]s get rebootpolicies,memcacheds,nsscalers -A
  %[2]s --kubeconfig %[1]s get deployments -n proj-a   # parked by the NSScaler: 0/0, original kept in an annotation
  %[2]s --kubeconfig %[1]s describe memcached -A
Manager logs stream below. Press Ctrl-C to stop and tear everything down.

`, c.Kubeconfig, kubectl)
	if exitAfterReady {
		return nil
	}
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
