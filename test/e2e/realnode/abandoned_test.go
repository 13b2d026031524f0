package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

// childKubeconfigEnv makes the test binary a process that starts a node,
// prints its name and folder and waits to be killed.
const childKubeconfigEnv = "RUNBOOK_REALNODE_CHILD_KUBECONFIG"

func runAbandonedNodeChild() int {
	n, err := realnode.Start(context.Background(), realnode.Options{
		Kubeconfig:  os.Getenv(childKubeconfigEnv),
		ClientCA:    os.Getenv("RUNBOOK_REALNODE_CHILD_CA"),
		ServiceCIDR: cluster.ServiceCIDR,
	})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("NODE", n.Name, n.Dir())
	select {}
}

// A node whose starter is SIGKILLed with a container running (no Stop) is
// reaped by the next Start (ReapAbandoned): its daemons, shim and container
// processes, the container's cgroups and its folder are gone.
func TestAbandonedNodeIsReaped(t *testing.T) {
	ctx := context.Background()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childKubeconfigEnv+"="+kc.Kubeconfig, "RUNBOOK_REALNODE_CHILD_CA="+filepath.Join(kc.PKIDir(), "ca.crt"))
	out, err := child.StdoutPipe()
	must(t, err)
	child.Stderr = os.Stderr
	must(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "NODE" {
		t.Fatalf("the child did not start its node: %q %v", line, err)
	}
	name, dir := f[1], f[2]

	ns := newNamespace(t)
	pod := webPod("abandoned", map[string]string{"app": "abandoned"})
	pod.Spec.NodeName = name
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, err)
	id := containerID(waitReady(t, ns, "abandoned", 2*time.Minute))
	if len(cgroupProcs(id)) == 0 {
		t.Fatalf("positive control: container %s has no processes in its cgroup", id[:12])
	}

	must(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	if len(cgroupProcs(id)) == 0 {
		t.Fatalf("positive control: the container %s should outlive its node's starter", id[:12])
	}
	realnode.ReapAbandoned()
	if p := cgroupProcs(id); len(p) > 0 {
		t.Errorf("container %s still has processes %v", id[:12], p)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io/" + id); len(left) > 0 {
		t.Errorf("the container's cgroups are left: %v", left)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the abandoned node's folder %s is left", dir)
	}
	if pids := cluster.ProcessesMentioning(dir, false); len(pids) > 0 {
		t.Errorf("processes of the abandoned node still run: %v", pids)
	}
	// The cluster's objects of the abandoned node are the cluster's to clean.
	_ = cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	_ = cs.DiscoveryV1().EndpointSlices("kube-system").Delete(ctx, "kube-dns-"+name, metav1.DeleteOptions{})
	_ = cs.DiscoveryV1().EndpointSlices("default").Delete(ctx, "kubernetes-"+name, metav1.DeleteOptions{})
}

func cgroupProcs(id string) []string {
	b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/k8s.io", id, "cgroup.procs"))
	return strings.Fields(string(b))
}
