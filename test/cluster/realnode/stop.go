package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Stop tears the node down and leaves nothing: the kubelet and kube-proxy
// stop first (so nothing recreates pods), every pod sandbox is removed through
// containerd (its containers, shims and network namespaces end), then
// containerd; whatever process is still in the node's network namespace or
// names its folder is killed. With the last process the node's namespaces end,
// and with them its mounts, bridge, iptables chains and the veth pair. The
// node object is deleted from the cluster. Safe to call twice.
func (n *Node) Stop() {
	if n == nil || n.dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var containerd *process
	for i := len(n.procs) - 1; i >= 0; i-- {
		if p := n.procs[i]; p.name == "containerd" {
			containerd = p
		} else {
			p.stop(15 * time.Second)
		}
	}
	if containerd != nil && !containerd.exited() {
		if _, err := n.Crictl(ctx, "rmp", "--all", "--force"); err != nil {
			fmt.Fprintf(os.Stderr, "real node %s: removing pods: %v\n", n.Name, err)
		}
		containerd.stop(15 * time.Second)
	}
	n.killLeftovers()
	n.proxy.stop()
	n.stopHostForwarders()
	n.netns.close()
	n.netns = nil
	if n.link != nil {
		deleteHostLink(n.link.host)
	}
	if _, err := os.Stat(n.opts.Kubeconfig); err == nil {
		n.stopDNS(ctx)
		n.stopAPIService(ctx)
		_, _ = n.kubectl(ctx, "delete", "node", n.Name, "--ignore-not-found", "--wait=false")
	}
	removeEmptyCgroupParents()
	_ = os.RemoveAll(n.dir)
	_ = os.Remove(stateBase) // only when no other node's folder is in it
	n.dir = ""
}

// removeEmptyCgroupParents removes the k8s.io cgroup that containerd creates
// in every hierarchy as the parent of the containers' cgroups (the kubelet
// runs without QoS cgroups, so it names none). A cgroup with children or
// processes cannot be removed, so another node's containers are safe.
func removeEmptyCgroupParents() {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}

// killLeftovers SIGKILLs what is still in the node's network namespace or
// mentions its folder (a container whose shim died, a stuck daemon) and waits
// until they are gone.
func (n *Node) killLeftovers() {
	find := func() []int {
		pids := pidsMentioning(n.dir)
		if n.netnsLink != "" {
			pids = append(pids, pidsInNetNS(n.netnsLink)...)
		}
		return pids
	}
	left := find()
	if len(left) == 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "real node %s: killing %d process(es) left behind: %v\n", n.Name, len(left), left)
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(find()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
