package realnode

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

// StatefulSet mode seen by a client pod: from another pod on the node,
// each ring-N name resolves through the kube-dns Service (kube-proxy, then
// CoreDNS) to that instance, which answers set and get; when ring-1's pod
// is replaced the same name reaches the new pod.
func TestMemcachedRingNamesFromAClientPod(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	_, err := cs.CoreV1().Pods(ns).Create(ctx, webPod("client", nil), metav1.CreateOptions{})
	must(t, err)
	mc := ringMemcached(t, ns)
	must(t, k8s.Create(ctx, mc))
	waitReady(t, ns, "client", 3*time.Minute)
	waitServers(t, mc, 3, 3*time.Minute)
	fromClient := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return node.DialFromPod(ctx, ns, "client", network, addr)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return fromClient(ctx, network, net.JoinHostPort(realnode.DNSServiceIP, "53"))
	}}
	lookup := func(i int) string {
		name := fmt.Sprintf("ring-%d.ring.%s.svc.%s", i, ns, realnode.ClusterDomain)
		var ip string
		eventually(t, time.Minute, "the name "+name+" from the client pod", func() error {
			ips, err := resolver.LookupHost(ctx, name)
			if err != nil {
				return err
			}
			p, err := cs.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("ring-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(ips) != 1 || ips[0] != p.Status.PodIP {
				return fmt.Errorf("%s resolves to %v, the pod's IP is %s", name, ips, p.Status.PodIP)
			}
			ip = ips[0]
			return nil
		})
		return ip
	}
	for i := range 3 {
		ip := lookup(i)
		key, value := fmt.Sprintf("k%d", i), fmt.Sprintf("ring-%d", i)
		reply := talkVia(t, fromClient, net.JoinHostPort(ip, "11211"), fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\nquit\r\n", key, len(value), value, key))
		if want := fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value); reply != want {
			t.Fatalf("ring-%d (%s) answered %q, want %q", i, ip, reply, want)
		}
		t.Logf("ring-%d -> %s: set/get from the client pod ok", i, ip)
	}
	old := lookup(1)
	must(t, cs.CoreV1().Pods(ns).Delete(ctx, "ring-1", metav1.DeleteOptions{}))
	eventually(t, 3*time.Minute, "ring-1 replaced and ready", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "ring-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				return nil
			}
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	})
	ip := lookup(1)
	reply := talkVia(t, fromClient, net.JoinHostPort(ip, "11211"), "get k1\r\nquit\r\n")
	if reply != "END\r\n" {
		t.Fatalf("the new ring-1 (%s) answered %q, want an empty cache", ip, reply)
	}
	t.Logf("ring-1 replaced: %s -> %s, the name follows, the new instance starts empty", old, ip)
}
