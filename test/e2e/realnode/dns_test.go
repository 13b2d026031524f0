package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

// Cluster DNS on the real node: from inside a pod, the cluster's DNS
// address resolves a Service's name to its cluster IP and the Service
// answers by that name; a name outside the cluster resolves to nothing.
func TestClusterDNSFromAPod(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := cs.CoreV1().Pods(ns).Create(ctx, webPod("web", map[string]string{"app": "web"}), metav1.CreateOptions{})
	must(t, err)
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().Pods(ns).Create(ctx, webPod("client", map[string]string{"app": "client"}), metav1.CreateOptions{})
	must(t, err)
	waitReady(t, ns, "web", 2*time.Minute)
	waitReady(t, ns, "client", 2*time.Minute)

	fromClient := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return node.DialFromPod(ctx, ns, "client", network, addr)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return fromClient(ctx, network, net.JoinHostPort(realnode.DNSServiceIP, "53"))
	}}
	name := fmt.Sprintf("web.%s.svc.%s", ns, realnode.ClusterDomain)
	eventually(t, time.Minute, "the Service's name from a pod", func() error {
		addrs, err := resolver.LookupHost(ctx, name)
		if err == nil && (len(addrs) != 1 || addrs[0] != svc.Spec.ClusterIP) {
			err = fmt.Errorf("%s resolves to %v, want [%s]", name, addrs, svc.Spec.ClusterIP)
		}
		return err
	})
	byName := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := resolver.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
		return fromClient(ctx, network, net.JoinHostPort(ips[0], port))
	}
	eventually(t, 30*time.Second, "the Service by name from a pod", func() error {
		body, err := httpGet(ctx, byName, "http://"+name+"/env")
		if err == nil && !strings.Contains(body, "HOSTNAME=web") {
			err = fmt.Errorf("answer not from the web pod: %q", body)
		}
		return err
	})
	outside, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if addrs, err := resolver.LookupHost(outside, "example.com"); err == nil {
		t.Fatalf("a name outside the cluster resolved from a pod: %v", addrs)
	} else {
		// The error names the host's configured server, but every query above
		// went to the cluster DNS address from inside the client pod.
		t.Logf("%s -> %s; example.com from the pod: %v", name, svc.Spec.ClusterIP, err)
	}
}
