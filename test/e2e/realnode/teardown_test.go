package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A second real node that ran a container is stopped: no process, mount,
// network namespace, interface, cgroup or iptables chain of it is left on
// the machine, and its node object is gone.
func TestNodeTeardownLeavesNothing(t *testing.T) {
	ctx := context.Background()
	before := hostKubeChains(t)
	_, err := os.Stat("/run/containerd")
	hadRunContainerd := err == nil
	second, err := startNode(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			second.Stop()
		}
	})
	ns := newNamespace(t)
	pod := webPod("pinned", map[string]string{"app": "pinned"})
	pod.Spec.NodeName = second.Name // bypasses the scheduler: only this node
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitReady(t, ns, "pinned", 2*time.Minute)
	if id := containerID(p); id == "" {
		t.Fatalf("pod pinned has no container: %+v", p.Status)
	}
	fp, err := second.Footprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.IDs) < 2 || fp.NetNS == "" || fp.MountNS == "" {
		t.Fatalf("footprint too small to prove anything: %+v", fp)
	}
	second.Stop()
	stopped = true
	if left := fp.Left(); len(left) > 0 {
		t.Errorf("node %s left behind:\n  %s", second.Name, strings.Join(left, "\n  "))
	}
	if _, err := os.Stat("/run/containerd"); err == nil && !hadRunContainerd {
		t.Errorf("the node created the host's /run/containerd")
	}
	if after := hostKubeChains(t); after != before {
		t.Errorf("the host's iptables KUBE- lines changed: %d before, %d after", before, after)
	}
	_, err = cs.CoreV1().Nodes().Get(ctx, second.Name, metav1.GetOptions{})
	if !isNotFound(err) {
		t.Errorf("node object %s still exists (%v)", second.Name, err)
	}
	t.Logf("node %s stopped; its %d sandboxes and containers, %s and %s left nothing", second.Name, len(fp.IDs), fp.NetNS, fp.MountNS)
	_ = cs.CoreV1().Pods(ns).Delete(ctx, "pinned", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
}

// hostKubeChains counts the host's iptables-save lines naming a KUBE- chain:
// kube-proxy runs inside each node's namespace, so the host's count never
// changes.
func hostKubeChains(t *testing.T) int {
	t.Helper()
	n := 0
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", tool, err))
		}
		n += strings.Count(string(out), "KUBE-")
	}
	return n
}
