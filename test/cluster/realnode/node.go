// Package realnode joins a real node to a local kwokctl cluster: containerd
// (runc, cgroupfs), a kubelet and kube-proxy built from the control plane's
// Kubernetes module, pods on a CNI bridge. Pods that must run real containers
// are steered to it by a label and a taint; kwok keeps the fake nodes.
//
// Everything the node creates lives in its own network and mount namespaces,
// entered by every process of the node: the pod bridge, kube-proxy's iptables
// chains, the node address and the container and volume mounts vanish with
// the node's processes, and the host's network is touched only by one veth
// pair. The node's namespace has no default route, so pods reach each other,
// Services, the node and the host's end of the veth, never anything outside
// this machine. The kubelet and kube-proxy reach the apiserver (which listens
// on the host's loopback) through a forwarder this process runs inside the
// node's namespace, so the node lives as long as the process that started it.
package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Label and Taint steer pods to the real node: a pod that must run a real
// container selects the label and tolerates the taint; everything else stays
// on kwok's nodes.
const (
	LabelKey   = "runbook.dev/node"
	LabelValue = "real"
	TaintKey   = "runbook.dev/real"
	TaintValue = "true"
)

// PodCIDR is the pods' subnet on the node's bridge. It exists only inside the
// node's network namespace, so every node may use the same one.
const PodCIDR = "10.244.0.0/24"

// Options shape the node.
type Options struct {
	// Kubeconfig is an admin kubeconfig of the cluster (the kubelet and
	// kube-proxy use its credentials).
	Kubeconfig string
	// ClientCA verifies the client certificates of the apiserver's calls to the
	// kubelet (logs, exec): the cluster's CA certificate.
	ClientCA string
	// ServiceCIDR is the cluster's Service range: the node routes it so that
	// its own connections to cluster IPs reach kube-proxy's rules.
	ServiceCIDR string
	// Name of the node (default real-<random>).
	Name string
	// BinDir holds kubelet, kube-proxy, containerd, its shim, ctr and crictl
	// (default bin/node of the repository).
	BinDir string
	// ImagesDir holds images.json and the OCI archives it names
	// (default bin/node-images of the repository).
	ImagesDir string
	// Log receives one line per start-up step (nil: silent).
	Log func(format string, args ...any)
	// Start starts a daemon of the node (nil: in its own process group with
	// SIGTERM as its parent-death signal). A caller whose OS threads may end
	// passes a starter that forks from one thread that lives as long as it:
	// Linux sends the parent-death signal when the forking thread exits.
	Start func(*exec.Cmd) error
}

// Node is a running real node.
type Node struct {
	Name string
	// IP is the node's address (the kubelet's and hostNetwork pods').
	IP string
	// Images maps an image name of images.json to the reference pods use.
	Images map[string]string

	opts      Options
	dir       string
	id        string
	link      *link
	nsPID     int    // containerd's pid: the node's namespaces are its
	netnsLink string // e.g. "net:[4026532281]", to find the node's processes
	netns     *netNS
	procs     []*process
	proxy     *apiForwarder
	logf      func(format string, args ...any)
	hostForwarders
}

// Start brings the node up and waits until it is Ready. On error nothing it
// started is left behind.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := Supported(); err != nil {
		return nil, err
	}
	ReapAbandoned()
	id := randomID()
	dir := filepath.Join(stateBase, "rbnode-"+id)
	if err := os.MkdirAll(stateBase, 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	n := &Node{Name: opts.Name, opts: opts, dir: dir, id: id, logf: opts.Log}
	if n.Name == "" {
		n.Name = "real-" + id
	}
	if n.logf == nil {
		n.logf = func(string, ...any) {}
	}
	if err := n.start(ctx); err != nil {
		n.Stop()
		return nil, fmt.Errorf("real node %s: %w", n.Name, err)
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	catalog, err := readCatalog(n.opts.ImagesDir)
	if err != nil {
		return err
	}
	pause, ok := catalog["pause"]
	if !ok {
		return fmt.Errorf("%s names no pause image: the node's sandboxes need one", filepath.Join(n.opts.ImagesDir, catalogFile))
	}
	if n.link, err = pickLink(ctx, n.id); err != nil {
		return err
	}
	n.IP = n.link.nodeIP
	if err := n.writeConfigs(pause.Ref); err != nil {
		return err
	}
	t0 := time.Now()
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if n.Images, err = n.importImages(ctx, catalog); err != nil {
		return err
	}
	n.logf("containerd up, %d images imported (%s)", len(n.Images), time.Since(t0).Round(time.Millisecond))
	if err := n.startAgents(ctx); err != nil {
		return err
	}
	if err := n.startDNS(ctx); err != nil {
		return err
	}
	if err := n.startAPIService(ctx); err != nil {
		return err
	}
	if err := n.waitReady(ctx, 3*time.Minute); err != nil {
		return err
	}
	n.logf("node %s Ready at %s (%s after start)", n.Name, n.IP, time.Since(t0).Round(time.Millisecond))
	return nil
}

func (o *Options) defaults() error {
	if o.Kubeconfig == "" || o.ClientCA == "" || o.ServiceCIDR == "" {
		return errors.New("realnode: Kubeconfig, ClientCA and ServiceCIDR are required")
	}
	root := repoRoot()
	if o.BinDir == "" {
		o.BinDir = filepath.Join(root, "bin", "node")
	}
	if o.ImagesDir == "" {
		o.ImagesDir = filepath.Join(root, "bin", "node-images")
	}
	for _, name := range nodeBinaries {
		p := filepath.Join(o.BinDir, name)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: run `make node-binaries`", p)
		}
	}
	return nil
}

var nodeBinaries = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "crictl", "coredns"}

// Dir is the node's state folder (configurations, logs, containerd's and the
// kubelet's state); Stop removes it.
func (n *Node) Dir() string { return n.dir }

// Logs returns the last lines of every component's log, for failure messages.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(n.dir, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", filepath.Base(l), strings.Join(all, "\n"))
	}
	return b.String()
}

// DialContext connects from the node's network namespace, as a process on the
// node would: Services' cluster IPs, pod IPs and the node's ports answer.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if n.netns == nil {
		return nil, errors.New("the node is not running")
	}
	return n.netns.dial(ctx, network, addr)
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DialFromPod connects from the network namespace of a pod running on this
// node, as a process in that pod would (its sandbox's namespace, found
// through the CRI), without needing a client program in the pod's image.
func (n *Node) DialFromPod(ctx context.Context, namespace, pod, network, addr string) (net.Conn, error) {
	pid, err := n.sandboxPID(ctx, namespace, pod)
	if err != nil {
		return nil, err
	}
	ns, err := openNetNS(pid)
	if err != nil {
		return nil, err
	}
	defer ns.close()
	return ns.dial(ctx, network, addr)
}

// sandboxPID is the pid of the ready sandbox (pause process) of a pod.
func (n *Node) sandboxPID(ctx context.Context, namespace, pod string) (int, error) {
	out, err := n.Crictl(ctx, "pods", "--namespace", namespace, "--name", "^"+pod+"$", "--state", "ready", "-q")
	if err != nil {
		return 0, err
	}
	ids := strings.Fields(out)
	if len(ids) != 1 {
		return 0, fmt.Errorf("pod %s/%s has %d ready sandboxes on node %s", namespace, pod, len(ids), n.Name)
	}
	out, err = n.Crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{.info.pid}}", ids[0])
	if err != nil {
		return 0, err
	}
	var pid int
	if _, err := fmt.Sscan(out, &pid); err != nil || pid <= 0 {
		return 0, fmt.Errorf("sandbox %s of pod %s/%s: no pid in %q", ids[0], namespace, pod, out)
	}
	return pid, nil
}
