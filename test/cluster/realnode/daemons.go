package realnode

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// startContainerd starts containerd in new network and mount namespaces (the
// node's: every later process of the node enters them), wires the node's
// network and waits until containerd answers.
func (n *Node) startContainerd(ctx context.Context) error {
	// slave: the host's mounts stay visible, the node's never reach the host.
	// The node's /run is its own tmpfs: containerd's shims and runc keep
	// sockets and state under /run/containerd regardless of its configuration.
	p, err := n.spawn("containerd", []string{"unshare", "--net", "--mount", "--propagation", "slave", "--",
		"sh", "-c", `mount -t tmpfs -o mode=0755,size=64m runbook-node-run /run && exec "$@"`, "sh",
		filepath.Join(n.opts.BinDir, "containerd"), "--config", n.path("containerd.toml")}, n.env())
	if err != nil {
		return err
	}
	n.nsPID = p.cmd.Process.Pid
	// unshare enters the new namespaces, then executes containerd: once the
	// process is containerd, its namespaces are the node's.
	bin, err := filepath.EvalSymlinks(filepath.Join(n.opts.BinDir, "containerd"))
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "containerd to start", func() error {
		if p.exited() {
			return fmt.Errorf("containerd exited: %v%s", p.err, n.Logs(20))
		}
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", n.nsPID)); exe != bin {
			return fmt.Errorf("pid %d is %q", n.nsPID, exe)
		}
		return nil
	}, p); err != nil {
		return err
	}
	if n.netns, err = openNetNS(n.nsPID); err != nil {
		return err
	}
	n.netnsLink, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/net", n.nsPID))
	if err := n.setupNetwork(ctx, n.nsPID, n.link); err != nil {
		return err
	}
	apiAddr, err := apiserverAddress(n.opts.Kubeconfig)
	if err != nil {
		return err
	}
	if n.proxy, err = startAPIForwarder(n.netns, apiAddr); err != nil {
		return err
	}
	return waitFor(ctx, time.Minute, "containerd to answer", func() error {
		if p.exited() {
			return fmt.Errorf("containerd exited: %v%s", p.err, n.Logs(20))
		}
		_, err := n.ctr(ctx, "version")
		return err
	}, p)
}

// nodeCommand runs args inside the node's mount namespace (its /run holds
// containerd's socket).
func (n *Node) nodeCommand(args ...string) []string {
	return append([]string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.nsPID), "--"}, args...)
}

// startAgents starts the kubelet and kube-proxy inside the node's namespaces.
func (n *Node) startAgents(ctx context.Context) error {
	enter := []string{"nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", n.nsPID), fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.nsPID), "--"}
	kubelet := append(append([]string{}, enter...), filepath.Join(n.opts.BinDir, "kubelet"),
		"--config", n.path("kubelet.yaml"),
		"--kubeconfig", n.path("kubeconfig.yaml"),
		"--root-dir", n.path("kubelet"),
		"--cert-dir", n.path("kubelet", "pki"),
		"--hostname-override", n.Name,
		"--node-ip", n.IP,
		"--node-labels", LabelKey+"="+LabelValue,
		"--v", "2")
	if _, err := n.spawn("kubelet", kubelet, n.env()); err != nil {
		return err
	}
	proxy := append(append([]string{}, enter...), filepath.Join(n.opts.BinDir, "kube-proxy"),
		"--config", n.path("kube-proxy.yaml"), "--v", "2")
	_, err := n.spawn("kube-proxy", proxy, n.env())
	return err
}

// waitReady waits for the node object's Ready condition.
func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	kubectl := filepath.Join(repoRoot(), "bin", "k8s", "kubectl")
	return waitFor(ctx, timeout, "node "+n.Name+" to be Ready", func() error {
		for _, p := range n.procs {
			if p.exited() {
				return fmt.Errorf("%s exited: %v%s", p.name, p.err, n.Logs(30))
			}
		}
		out, err := run(ctx, nil, kubectl, "--kubeconfig", n.opts.Kubeconfig, "get", "node", n.Name,
			"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("Ready=%q", out)
		}
		return nil
	})
}

// waitFor polls check every 250 ms until it returns nil, the timeout passes
// or a watched process exits (which fails at once).
func waitFor(ctx context.Context, timeout time.Duration, what string, check func() error, watch ...*process) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		for _, p := range watch {
			if p.exited() {
				return last
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %s for %s: %w", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// apiserverAddress is host:port of the kubeconfig's current server.
func apiserverAddress(kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}
