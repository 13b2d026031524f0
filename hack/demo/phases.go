package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

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

// wakeRequestRoles are the ClusterRoles (config/rbac) that the cluster's
// aggregation controller folds into the built-in edit, admin and view roles,
// as the chart installs them: without them whoever may edit a namespace may
// still not wake it with a WakeRequest.
var wakeRequestRoles = []string{"wakerequest_editor_role.yaml", "wakerequest_viewer_role.yaml"}

// prepare installs the CRDs, the WakeRequest roles and the manager's own
// namespace (it holds the fingerprint key).
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
	d.say("installing the WakeRequest roles that the built-in edit, admin and view roles aggregate (config/rbac)")
	args := []string{"apply", "--server-side"}
	for _, f := range wakeRequestRoles {
		args = append(args, "-f", filepath.Join(d.root, "config", "rbac", f))
	}
	if out, err = c.Kubectl(ctx, args...); err != nil {
		return err
	}
	_, _ = fmt.Fprint(d.out, indent(out))
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
