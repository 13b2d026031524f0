package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateBase holds the nodes' state folders. Not under TMPDIR: unix socket
// paths (the kubelet's among them) must stay under 108 bytes, and a test's
// or the demo's TMPDIR can be deep.
const stateBase = "/var/tmp/runbook-nodes"

// ownerFile in a node's folder holds the pid of the process that started it.
const ownerFile = "owner"

// ReapAbandoned removes what nodes whose starter died without Stop (a
// SIGKILLed test or demo) left: their daemons, shims and containers, their
// containers' cgroups and their folder. Their namespaces, mounts and veth
// pair end with their last process. Start calls it first.
func ReapAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(stateBase, "rbnode-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil && syscall.Kill(pid, 0) == nil {
				continue // its starter runs: not abandoned
			}
		}
		// Daemons name the folder on their command line, shims work in their
		// bundle inside it, containers are in cgroups named by their IDs,
		// which name their bundles.
		pids := append(pidsMentioning(dir), pidsWorkingUnder(dir)...)
		bundles, _ := os.ReadDir(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io"))
		for _, b := range bundles {
			pids = append(pids, cgroupPids(b.Name())...)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, b := range bundles {
			for i := 0; i < 100 && len(cgroupPids(b.Name())) > 0; i++ {
				time.Sleep(50 * time.Millisecond) // SIGKILL is not instant
			}
			removeCgroups(b.Name())
		}
		if len(pids) > 0 {
			fmt.Fprintf(os.Stderr, "realnode: killed %d process(es) of an abandoned node in %s\n", len(pids), dir)
		}
		_ = os.RemoveAll(dir)
	}
}

// pidsWorkingUnder lists the processes whose working directory is in dir.
func pidsWorkingUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cgroupPids lists the processes of the container cgroup id (containerd puts
// it under k8s.io in every hierarchy; the pids hierarchy has them all).
func cgroupPids(id string) []int {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/k8s.io", id, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func removeCgroups(id string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*/k8s.io", id))
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}
