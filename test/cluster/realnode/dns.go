package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Cluster DNS: CoreDNS (its kubernetes plugin, nothing forwarded: names
// outside the cluster do not resolve) runs as a daemon of the node, in its
// network namespace. The kube-dns Service (DNSServiceIP, no selector) has an
// EndpointSlice per real node pointing at that node's CoreDNS; the Service's
// internalTrafficPolicy Local keeps each node's pods on their own node's DNS.
const (
	DNSServiceIP  = "10.0.0.10"
	ClusterDomain = "cluster.local"
)

func (n *Node) corefile() string {
	return fmt.Sprintf(`.:53 {
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
`, ClusterDomain, n.path("kubeconfig.yaml"))
}

func (n *Node) dnsSliceName() string { return "kube-dns-" + n.Name }

// dnsObjects is the kube-dns Service and this node's EndpointSlice of it.
func (n *Node) dnsObjects() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: %[1]s
  internalTrafficPolicy: Local
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[2]s
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: runbook.dev-realnode
addressType: IPv4
endpoints:
- addresses: [%[3]q]
  nodeName: %[4]s
  conditions: {ready: true}
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
`, DNSServiceIP, n.dnsSliceName(), n.IP, n.Name)
}

// startDNS starts CoreDNS in the node's network namespace and publishes it.
func (n *Node) startDNS(ctx context.Context) error {
	if err := os.WriteFile(n.path("Corefile"), []byte(n.corefile()), 0o600); err != nil {
		return err
	}
	args := []string{"nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", n.nsPID), "--",
		filepath.Join(n.opts.BinDir, "coredns"), "-conf", n.path("Corefile")}
	if _, err := n.spawn("coredns", args, n.env()); err != nil {
		return err
	}
	objects := n.path("dns.yaml")
	if err := os.WriteFile(objects, []byte(n.dnsObjects()), 0o600); err != nil {
		return err
	}
	_, err := n.kubectl(ctx, "apply", "--server-side", "--force-conflicts", "--field-manager", "runbook-realnode", "-f", objects)
	return err
}

// stopDNS removes this node's endpoint of kube-dns (the Service stays: it
// only holds its address).
func (n *Node) stopDNS(ctx context.Context) {
	_, _ = n.kubectl(ctx, "-n", "kube-system", "delete", "endpointslice", n.dnsSliceName(), "--ignore-not-found", "--wait=false")
}

func (n *Node) kubectl(ctx context.Context, args ...string) (string, error) {
	kubectl := filepath.Join(repoRoot(), "bin", "k8s", "kubectl")
	all := append([]string{kubectl, "--kubeconfig", n.opts.Kubeconfig, "--request-timeout", "20s"}, args...)
	out, err := run(ctx, nil, all...)
	return strings.TrimSpace(out), err
}
