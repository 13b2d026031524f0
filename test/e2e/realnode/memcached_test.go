package realnode

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster/realnode"
)

// Memcached on real pods: size 3 runs three memcached containers (the image
// built from Debian's package) under the controller's args and restricted
// securityContext, and each status.servers address answers set and get.
// The Service is headless: without cluster DNS only the addresses are tried.
func TestMemcachedOnRealPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec:       cachev1alpha1.MemcachedSpec{Size: new(int32(3))},
	}
	onTheNode(t, &mc.Spec)
	must(t, k8s.Create(ctx, mc))
	servers := waitServers(t, mc, 3, 3*time.Minute)
	if got := containersOfNamespace(t, ns); len(got) != 3 {
		t.Fatalf("%d running containers of %s on the node, want 3: %v", len(got), ns, got)
	}
	for i, addr := range servers {
		key, value := fmt.Sprintf("k%d", i), fmt.Sprintf("v-%s-%d", ns, i)
		reply := memcachedTalk(t, addr, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\nstats\r\nquit\r\n", key, len(value), value, key))
		want := fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value)
		if !strings.HasPrefix(reply, want) {
			t.Fatalf("server %s answered %q, want it to start with %q", addr, reply, want)
		}
		t.Logf("server %s: set/get ok; %s", addr, statsLine(reply, "version", "pid", "uptime", "curr_connections", "limit_maxbytes", "threads"))
	}
}

// StatefulSet mode on real pods: each status.servers entry is a stable
// name (ring-N through the headless Service) that the cluster DNS resolves
// to a pod running on the node, and that pod's memcached answers.
func TestMemcachedStatefulSetNamesOnRealPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mc := ringMemcached(t, ns)
	must(t, k8s.Create(ctx, mc))
	servers := waitServers(t, mc, 3, 3*time.Minute)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return node.DialContext(ctx, network, net.JoinHostPort(realnode.DNSServiceIP, "53"))
	}}
	for i, server := range servers {
		host, port, err := net.SplitHostPort(server)
		must(t, err)
		if !strings.HasPrefix(host, fmt.Sprintf("ring-%d.", i)) {
			t.Fatalf("server %d is %s, want the stable name ring-%d.…", i, server, i)
		}
		// A pod resolves the name through its resolv.conf's search list
		// (…svc.cluster.local first); this resolver has the host's list.
		fqdn := host
		if !strings.HasSuffix(host, "."+realnode.ClusterDomain) {
			fqdn = host + "." + realnode.ClusterDomain
		}
		var ips []string
		eventually(t, time.Minute, "the name "+fqdn, func() error {
			ips, err = resolver.LookupHost(ctx, fqdn)
			return err
		})
		addr := net.JoinHostPort(ips[0], port)
		key, value := fmt.Sprintf("k%d", i), "v-"+host
		reply := memcachedTalk(t, addr, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\nquit\r\n", key, len(value), value, key))
		if want := fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value); reply != want {
			t.Fatalf("%s (%s) answered %q, want %q", server, addr, reply, want)
		}
		t.Logf("%s -> %s: set/get ok", server, addr)
	}
}

// onTheNode runs the Memcached's pods on the real node, from the memcached
// image built for it.
func onTheNode(t *testing.T, spec *cachev1alpha1.MemcachedSpec) {
	t.Helper()
	img, ok := node.Images["memcached"]
	if !ok {
		t.Fatal("bin/node-images/images.json names no memcached image (make node-images)")
	}
	spec.Image = img
	spec.ImagePullPolicy = corev1.PullIfNotPresent
	spec.NodeSelector = map[string]string{realnode.LabelKey: realnode.LabelValue}
	spec.Tolerations = nodeTolerations()
}

// ringMemcached is a StatefulSet-mode Memcached "ring" of three on the
// node: its servers are the stable names ring-N.
func ringMemcached(t *testing.T, ns string) *cachev1alpha1.Memcached {
	t.Helper()
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ring"},
		Spec:       cachev1alpha1.MemcachedSpec{WorkloadKind: cachev1alpha1.WorkloadStatefulSet, Size: new(int32(3))},
	}
	onTheNode(t, &mc.Spec)
	return mc
}

// waitServers waits until size instances of mc are ready and returns its
// status.servers.
func waitServers(t *testing.T, mc *cachev1alpha1.Memcached, size int, timeout time.Duration) []string {
	t.Helper()
	var servers []string
	eventually(t, timeout, fmt.Sprintf("%d ready memcached servers", size), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
			return err
		}
		servers = mc.Status.Servers
		if int(mc.Status.ReadyReplicas) != size || len(servers) != size {
			return fmt.Errorf("ready %d, servers %v, conditions %+v", mc.Status.ReadyReplicas, servers, mc.Status.Conditions)
		}
		return nil
	})
	return servers
}

// memcachedTalk is talkVia from the node.
func memcachedTalk(t *testing.T, addr, script string) string {
	t.Helper()
	return talkVia(t, node.DialContext, addr, script)
}

// talkVia sends script to a memcached text-protocol server through dial
// and returns everything it answered until it closed the connection.
func talkVia(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	must(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String()
		}
	}
}

// statsLine picks the named "STAT name value" lines of a stats reply.
func statsLine(reply string, names ...string) string {
	var out []string
	for _, l := range strings.Split(reply, "\r\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "STAT" {
			for _, n := range names {
				if f[1] == n {
					out = append(out, n+"="+f[2])
				}
			}
		}
	}
	return strings.Join(out, " ")
}
