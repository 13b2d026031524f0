package realnode

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Footprint is what a running node holds on the machine, recorded so that
// after Stop the caller can prove none of it is left.
type Footprint struct {
	Dir      string
	NetNS    string // "net:[inode]" of the node's namespace
	MountNS  string // "mnt:[inode]"
	HostLink string
	// IDs of every pod sandbox and container the node's containerd knows
	// (their cgroups and shims are named by them).
	IDs []string
}

// Footprint records what the node holds now.
func (n *Node) Footprint(ctx context.Context) (Footprint, error) {
	f := Footprint{Dir: n.dir, NetNS: n.netnsLink}
	if n.link != nil {
		f.HostLink = n.link.host
	}
	f.MountNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.nsPID))
	for _, args := range [][]string{{"pods", "-q"}, {"ps", "-a", "-q"}} {
		out, err := n.Crictl(ctx, args...)
		if err != nil {
			return f, err
		}
		f.IDs = append(f.IDs, strings.Fields(out)...)
	}
	return f, nil
}

// Left lists what of the footprint still exists: processes in the node's
// namespaces or naming its folder, the folder, the host's veth end, mounts of
// the host naming the folder, cgroups or processes naming a sandbox or
// container. Empty means the node left nothing.
func (f Footprint) Left() []string {
	var left []string
	for _, pid := range pidsMentioning(f.Dir) {
		left = append(left, fmt.Sprintf("process %d names %s", pid, f.Dir))
	}
	for _, ns := range []string{f.NetNS, f.MountNS} {
		if ns == "" {
			continue
		}
		kind := strings.SplitN(ns, ":", 2)[0]
		for _, pid := range pidsInNamespace(kind, ns) {
			left = append(left, fmt.Sprintf("process %d is in the node's %s", pid, ns))
		}
	}
	if _, err := os.Stat(f.Dir); err == nil {
		left = append(left, "folder "+f.Dir)
	}
	if _, err := os.Stat("/sys/class/net/" + f.HostLink); f.HostLink != "" && err == nil {
		left = append(left, "host interface "+f.HostLink)
	}
	left = append(left, mountsNaming(f.Dir)...)
	left = append(left, cgroupsNaming(f.IDs)...)
	for _, id := range f.IDs {
		for _, pid := range pidsMentioning(id) {
			left = append(left, fmt.Sprintf("process %d names container %s", pid, id))
		}
	}
	return left
}

func mountsNaming(needle string) []string {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	defer func() { _ = file.Close() }()
	var left []string
	s := bufio.NewScanner(file)
	for s.Scan() {
		if strings.Contains(s.Text(), needle) {
			left = append(left, "mount "+s.Text())
		}
	}
	return left
}

// cgroupsNaming walks the cgroup hierarchies for directories named after ids.
func cgroupsNaming(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	var left []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		for _, id := range ids {
			if strings.Contains(d.Name(), id) {
				left = append(left, "cgroup "+p)
				return fs.SkipDir
			}
		}
		return nil
	})
	return left
}

// pidsInNamespace lists the processes whose /proc/<pid>/ns/<kind> is link.
func pidsInNamespace(kind, link string) []int {
	if kind == "net" {
		return pidsInNetNS(link)
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", kind)); err == nil && l == link {
			pids = append(pids, pid)
		}
	}
	return pids
}
