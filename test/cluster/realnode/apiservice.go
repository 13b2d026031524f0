package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// In-cluster clients (a pod's ServiceAccount) reach the apiserver through
// Service default/kubernetes. The apiserver listens on the host's loopback,
// which no pod can reach, and the cluster runs it without an endpoint
// reconciler (cluster.Options.ForRealNode): each real node publishes an
// EndpointSlice of that Service naming the host's end of its veth, where a
// forwarder of this process copies bytes to the apiserver. The Service's
// internalTrafficPolicy Local keeps each node's pods on their own node's
// forwarder (another node's host end is not routed from this one).

func (n *Node) apiSliceName() string { return "kubernetes-" + n.Name }

func (n *Node) apiObjects(port int) string {
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
    endpointslice.kubernetes.io/managed-by: runbook.dev-realnode
addressType: IPv4
endpoints:
- addresses: [%[2]q]
  nodeName: %[3]s
  conditions: {ready: true}
ports:
- {name: https, port: %[4]d, protocol: TCP}
`, n.apiSliceName(), n.link.hostIP, n.Name, port)
}

// startAPIService forwards the host's end of the veth to the apiserver and
// publishes it as this node's endpoint of Service default/kubernetes.
func (n *Node) startAPIService(ctx context.Context) error {
	apiAddr, err := apiserverAddress(n.opts.Kubeconfig)
	if err != nil {
		return err
	}
	_, portText, err := net.SplitHostPort(apiAddr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	if _, err := n.ForwardFromHost(port, apiAddr); err != nil {
		return fmt.Errorf("forwarding the apiserver to the node's pods: %w", err)
	}
	objects := n.path("kubernetes-endpoints.yaml")
	if err := os.WriteFile(objects, []byte(n.apiObjects(port)), 0o600); err != nil {
		return err
	}
	if _, err := n.kubectl(ctx, "apply", "--server-side", "--force-conflicts", "--field-manager", "runbook-realnode", "-f", objects); err != nil {
		return err
	}
	_, err = n.kubectl(ctx, "-n", "default", "patch", "service", "kubernetes", "--type", "merge",
		"-p", `{"spec":{"internalTrafficPolicy":"Local"}}`)
	return err
}

// stopAPIService removes this node's endpoint of default/kubernetes.
func (n *Node) stopAPIService(ctx context.Context) {
	_, _ = n.kubectl(ctx, "-n", "default", "delete", "endpointslice", n.apiSliceName(), "--ignore-not-found", "--wait=false")
}

// HostIP is the host's end of the node's veth: the one address of the
// machine the node's pods can reach (nothing listens there but what
// ForwardFromHost starts).
func (n *Node) HostIP() string {
	if n.link == nil {
		return ""
	}
	return n.link.hostIP
}

// ForwardFromHost listens on port of the host's end of the veth and copies
// each connection to target (an address of the host, e.g. a database on its
// loopback): the node's pods reach target at the returned address, which
// stands for a server outside the cluster. Port 0 picks a free one. The
// forwarder ends with the node.
func (n *Node) ForwardFromHost(port int, target string) (string, error) {
	if n.link == nil {
		return "", fmt.Errorf("the node has no link to the host")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(n.link.hostIP, strconv.Itoa(port)))
	if err != nil {
		return "", err
	}
	n.fwdMu.Lock()
	n.fwds = append(n.fwds, serveForward(l, target))
	n.fwdMu.Unlock()
	return l.Addr().String(), nil
}

// stopHostForwarders closes every listener of ForwardFromHost.
func (n *Node) stopHostForwarders() {
	n.fwdMu.Lock()
	defer n.fwdMu.Unlock()
	for _, f := range n.fwds {
		f.stop()
	}
	n.fwds = nil
}

// hostForwarders is embedded in Node.
type hostForwarders struct {
	fwdMu sync.Mutex
	fwds  []*apiForwarder
}
