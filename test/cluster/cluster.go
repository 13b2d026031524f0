// Package cluster runs the end-to-end test cluster: a kwokctl cluster whose
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler are real
// processes built from source, with kwok nodes on which pods go Running
// without containers. ReplicaSets, garbage collection and scheduling are real.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runbook-dev/runbook/test/testenv"
)

// Options shape the cluster.
type Options struct {
	// Nodes is the number of fake nodes (default 3).
	Nodes int
	// NamePrefix names the cluster (a random suffix keeps parallel runs apart).
	NamePrefix string
	// AuditPolicy, when set, is the content of an audit policy
	// (audit.k8s.io/v1 Policy, YAML) the kube-apiserver logs requests by;
	// Cluster.AuditLog names the JSON-lines log it writes. Empty: no
	// auditing, as before.
	AuditPolicy string
	// ForRealNode prepares the cluster for a real kubelet (test/cluster/realnode):
	// kwok manages only the nodes `kwokctl scale node` creates (annotated
	// kwok.x-k8s.io/node=fake) instead of every node, so it does not fake the
	// real node's pods; the apiserver calls kubelets (logs, exec) with the
	// cluster's admin client certificate, which the real kubelet verifies.
	ForRealNode bool
}

// Cluster is a running kwokctl cluster.
type Cluster struct {
	Name       string
	Kubeconfig string
	Config     *rest.Config
	workdir    string
	env        []string
	audit      bool
}

var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwokctl"}

// Start creates the cluster and waits until its nodes are Ready and its
// controller-manager works. The caller must call Stop (also on failure paths)
// to tear every process down.
//
// On two busy cores kube-controller-manager sometimes exits at start-up
// because the apiserver was not healthy in time, and kwokctl does not restart
// it: such a cluster schedules nothing. That start-up failure of the test
// infrastructure (not of the code under test) is retried once, loudly.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := testenv.RequireBinaries(binaries...); err != nil {
		return nil, err
	}
	c, err := start(ctx, opts)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "cluster: first start failed, trying once more: %v\n", err)
		c, err = start(ctx, opts)
	}
	return c, err
}

func start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = "runbook"
	}
	c, config, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	// --kubeconfig keeps kwokctl away from the user's ~/.kube/config.
	if _, err := c.kwokctl(ctx, "create", "cluster", "--config", config, "--wait", "2m",
		"--kubeconfig", filepath.Join(c.workdir, "kubeconfig.yaml")); err != nil {
		return nil, c.failStart(err)
	}
	if _, err := c.kwokctl(ctx, "scale", "node", "--replicas", fmt.Sprint(opts.Nodes)); err != nil {
		return nil, c.failStart(err)
	}
	c.Kubeconfig = filepath.Join(c.workdir, "clusters", c.Name, "kubeconfig.yaml")
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, c.failStart(fmt.Errorf("loading kubeconfig of cluster %s: %w", c.Name, err))
	}
	c.Config.QPS, c.Config.Burst = 500, 1000
	if err := c.waitUsable(ctx); err != nil {
		return nil, c.failStart(err)
	}
	return c, nil
}

// newCluster names the cluster, makes its work directory and writes its
// kwokctl configuration (explicit free ports, the built binaries).
func newCluster(opts Options) (*Cluster, string, error) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := fmt.Sprintf("%s-%s", opts.NamePrefix, hex.EncodeToString(suffix))
	workdir, err := os.MkdirTemp("", "kwok-"+name+"-")
	if err != nil {
		return nil, "", err
	}
	bin := testenv.BinDir()
	c := &Cluster{
		Name:    name,
		workdir: workdir,
		// kwokctl looks kubectl up on PATH; /usr/bin/kubectl on these
		// machines is not a real kubectl, so the built one must come first.
		env: append(os.Environ(), "KWOK_WORKDIR="+workdir, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH")),
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, "", err
	}
	yaml := configYAML(bin, ports)
	if opts.ForRealNode { // still inside options:
		yaml += forRealNodeOptionsYAML()
	}
	if opts.AuditPolicy != "" {
		policy := filepath.Join(workdir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(opts.AuditPolicy), 0o600); err != nil {
			return nil, "", err
		}
		yaml += fmt.Sprintf("  kubeAuditPolicy: %s\n", policy)
		c.audit = true
	}
	if opts.ForRealNode { // a top-level field: after every option
		yaml += forRealNodeYAML(filepath.Join(workdir, "clusters", name, "pki"))
	}
	config := filepath.Join(workdir, "kwokctl.yaml")
	return c, config, os.WriteFile(config, []byte(yaml), 0o600)
}

// waitUsable waits for Ready nodes and for the "default" ServiceAccount,
// which the controller-manager's serviceaccount controller creates: its
// presence proves the controller-manager runs (and pods can be admitted,
// which needs that account).
func (c *Cluster) waitUsable(ctx context.Context) error {
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "node", "--all", "--timeout=180s"); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "wait", "--for=create", "serviceaccount/default", "-n", "default", "--timeout=120s")
	return err
}

// failStart tears a half-started cluster down and returns err with the tail
// of every component's log, so a start-up failure explains itself.
func (c *Cluster) failStart(err error) error {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(c.workdir, "clusters", c.Name, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
	c.Stop()
	return fmt.Errorf("cluster %s did not start: %w%s", c.Name, err, b.String())
}

// configYAML is the kwokctl configuration that points every component at the
// binaries built from source, so kwokctl downloads nothing. Ports are given
// explicitly: kwokctl's own choice counts down from 32766 and two clusters
// created at the same moment (parallel test packages) would collide.
func configYAML(bin string, ports []int) string {
	return fmt.Sprintf(`kind: KwokctlConfiguration
apiVersion: config.kwok.x-k8s.io/v1alpha1
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeVersion: v1.37.2
  etcdVersion: 3.6.16
  etcdBinary: %[1]s/etcd
  kubeApiserverBinary: %[1]s/kube-apiserver
  kubeControllerManagerBinary: %[1]s/kube-controller-manager
  kubeSchedulerBinary: %[1]s/kube-scheduler
  kubectlBinary: %[1]s/kubectl
  kwokControllerBinary: %[1]s/kwok
  etcdPort: %[2]d
  etcdPeerPort: %[3]d
  kubeApiserverPort: %[4]d
  kubeControllerManagerPort: %[5]d
  kubeSchedulerPort: %[6]d
  kwokControllerPort: %[7]d
`, bin, ports[0], ports[1], ports[2], ports[3], ports[4], ports[5])
}

// forRealNodeYAML patches kwokctl's components. Its binary runtime always
// passes kwok --manage-all-nodes=true, which is overridden; the annotation
// kwokctl puts on the nodes it creates selects them instead. kwokctl gives the
// apiserver no kubelet client certificate: the admin's is added. The apiserver
// reaches a kubelet at its node's InternalIP: the real node's name resolves
// nowhere (and must not be looked up outside this machine).
func forRealNodeYAML(pki string) string {
	return fmt.Sprintf(`componentsPatches:
- name: kwok-controller
  extraArgs:
  - key: manage-all-nodes
    value: "false"
    override: true
  - key: manage-nodes-with-annotation-selector
    value: kwok.x-k8s.io/node=fake
- name: kube-apiserver
  extraArgs:
  - key: kubelet-client-certificate
    value: %[1]s/admin.crt
  - key: kubelet-client-key
    value: %[1]s/admin.key
  - key: service-cluster-ip-range
    value: %[2]s
  - key: kubelet-preferred-address-types
    value: InternalIP,Hostname
  - key: endpoint-reconciler-type
    value: none
`, pki, ServiceCIDR)
}

// forRealNodeOptionsYAML lets pods on a real node use the apiserver through
// Service default/kubernetes: its certificate names the Service's cluster IP
// (what in-cluster clients verify), and the apiserver does not publish its
// own address (a loopback one, or one of the machine's that it does not
// listen on) as the Service's endpoint: each real node publishes the
// forwarder it runs for its pods (test/cluster/realnode).
func forRealNodeOptionsYAML() string {
	return fmt.Sprintf("  kubeApiserverCertSANs: [%q]\n", KubernetesServiceIP)
}

// KubernetesServiceIP is the cluster IP of Service default/kubernetes in a
// cluster started ForRealNode: the first address of ServiceCIDR.
const KubernetesServiceIP = "10.0.0.1"

// ServiceCIDR is the Service range of a cluster started ForRealNode (the
// apiserver's default range, made explicit: the real node routes it).
const ServiceCIDR = "10.0.0.0/24"

// PKIDir holds the cluster's CA (ca.crt) and admin client certificate.
func (c *Cluster) PKIDir() string {
	return filepath.Join(c.workdir, "clusters", c.Name, "pki")
}

// Stop deletes the cluster and its work directory. It is safe to call twice.
func (c *Cluster) Stop() {
	if c == nil || c.workdir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.kwokctl(ctx, "delete", "cluster"); err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: delete failed: %v\n", c.Name, err)
	}
	// Every component runs with a path inside workdir on its command line;
	// whatever kwokctl failed to stop is killed, so no process outlives the test.
	if left := killProcessesMentioning(c.workdir); left > 0 {
		fmt.Fprintf(os.Stderr, "cluster %s: killed %d process(es) left behind by kwokctl delete\n", c.Name, left)
	}
	_ = os.RemoveAll(c.workdir)
	c.workdir = ""
}

// AuditLog is the path of the kube-apiserver's audit log (one JSON event a
// line, audit.k8s.io/v1), or "" when the cluster was started without
// Options.AuditPolicy. It grows while the cluster runs and is removed by Stop.
func (c *Cluster) AuditLog() string {
	if !c.audit {
		return ""
	}
	return filepath.Join(c.workdir, "clusters", c.Name, "logs", "audit.log")
}

// Kubectl runs the built kubectl against the cluster and returns its stdout.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, filepath.Join(testenv.BinDir(), "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, filepath.Join(testenv.BinDir(), "kwokctl"), append([]string{"--name", c.Name}, args...)...)
}

func (c *Cluster) run(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// killProcessesMentioning SIGKILLs every process whose command line contains
// needle and returns how many it found.
func killProcessesMentioning(needle string) int {
	return len(ProcessesMentioning(needle, true))
}

// ProcessesMentioning lists the pids whose command line contains needle,
// killing them first when kill is set.
func ProcessesMentioning(needle string, kill bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(needle)) {
			continue
		}
		pids = append(pids, pid)
		if kill {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return pids
}
