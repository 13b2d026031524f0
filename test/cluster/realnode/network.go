package realnode

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
)

// link is the veth pair between the host and the node's namespace: a /30 of
// 172.31.0.0/16 with the host at .1 and the node (its IP) at .2. The host
// needs it for the apiserver's calls to the kubelet (logs, exec).
type link struct {
	host, node     string // interface names
	hostIP, nodeIP string
}

// pickLink chooses a /30 that no address of the host is in yet.
func pickLink(ctx context.Context, id string) (*link, error) {
	out, err := run(ctx, nil, "ip", "-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	for range 64 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		base := fmt.Sprintf("172.31.%d.%d", b[0], b[1]&0xfc)
		_, subnet, _ := net.ParseCIDR(base + "/30")
		if inUse(out, subnet) {
			continue
		}
		ip := subnet.IP.To4()
		return &link{
			host:   "rbh" + id,
			node:   "rbn" + id,
			hostIP: fmt.Sprintf("%d.%d.%d.%d", ip[0], ip[1], ip[2], ip[3]+1),
			nodeIP: fmt.Sprintf("%d.%d.%d.%d", ip[0], ip[1], ip[2], ip[3]+2),
		}, nil
	}
	return nil, fmt.Errorf("no free /30 in 172.31.0.0/16 for the node's link")
}

func inUse(ipAddrOutput string, subnet *net.IPNet) bool {
	for _, f := range strings.Fields(ipAddrOutput) {
		if ip, _, err := net.ParseCIDR(f); err == nil && subnet.Contains(ip) {
			return true
		}
	}
	return false
}

// setupNetwork creates the veth pair into the namespace of pid (containerd's,
// which every process of the node shares) and configures both ends and the
// namespace's sysctls. No default route is added inside the namespace.
func (n *Node) setupNetwork(ctx context.Context, pid int, l *link) error {
	nsenter := []string{"nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", pid), "--"}
	steps := [][]string{
		{"ip", "link", "add", l.host, "type", "veth", "peer", "name", l.node, "netns", fmt.Sprint(pid)},
		{"ip", "addr", "add", l.hostIP + "/30", "dev", l.host},
		{"ip", "link", "set", l.host, "up"},
		append(nsenter, "ip", "link", "set", "lo", "up"),
		append(nsenter, "ip", "addr", "add", l.nodeIP+"/30", "dev", l.node),
		append(nsenter, "ip", "link", "set", l.node, "up"),
		// A connection of the node to a cluster IP needs a route before
		// kube-proxy's OUTPUT rules rewrite its destination to a pod. One
		// kube-proxy does not rewrite (a Service without endpoints) goes to
		// the host, which does not forward it.
		append(nsenter, "ip", "route", "add", n.opts.ServiceCIDR, "via", l.hostIP, "dev", l.node),
		// Pods reach the host's end of the veth (the apiserver's and test
		// servers' forwarders) from the node's address: the host has no
		// route back to the pods' subnet, which every node uses.
		append(nsenter, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", PodCIDR, "-o", l.node, "-j", "MASQUERADE"),
	}
	for _, s := range steps {
		if _, err := run(ctx, nil, s...); err != nil {
			return err
		}
	}
	// Forwarding inside the namespace only: pod → Service → pod crosses the
	// node's bridge gateway. The host's own forwarding is not changed.
	for key, value := range map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := n.netns.writeSysctl(key, value); err != nil {
			return fmt.Errorf("sysctl %s in the node's namespace: %w", key, err)
		}
	}
	return nil
}

// deleteHostLink removes the host's end of the veth pair (the kernel removes
// it with the namespace too; this covers a namespace kept alive elsewhere).
func deleteHostLink(name string) {
	if name == "" {
		return
	}
	_ = exec.Command("ip", "link", "del", name).Run()
}

// apiForwarder lets the node's processes reach the apiserver, which listens
// on the host's loopback: it listens on the same loopback address and port
// inside the node's namespace (so the kubeconfig and the apiserver's
// certificate stay as they are) and copies bytes to the host's.
type apiForwarder struct {
	l net.Listener
}

func startAPIForwarder(ns *netNS, hostAddr string) (*apiForwarder, error) {
	l, err := ns.listen("tcp", hostAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s inside the node's namespace: %w", hostAddr, err)
	}
	return serveForward(l, hostAddr), nil
}

// serveForward copies every connection accepted on l to target.
func serveForward(l net.Listener, target string) *apiForwarder {
	f := &apiForwarder{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	}()
	return f
}

func forward(in net.Conn, addr string) {
	defer func() { _ = in.Close() }()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done // either side closing ends both
}

// stop closes the listener; open connections end when their peers go away
// (the node's processes are stopped first).
func (f *apiForwarder) stop() {
	if f != nil {
		_ = f.l.Close()
	}
}
