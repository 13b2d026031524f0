package operations

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// TestAPIServerRestart stops the kube-apiserver under a running manager
// (with every controller on) and starts it again. The manager must survive
// the outage, re-establish its watches on its own and act on what happens
// afterwards: a Memcached created after the restart becomes Available, a
// Memcached scaled after it follows, and a ConfigMap change restarts a
// RebootPolicy's target exactly once.
//
// The manager runs without leader election here: with it, an outage longer
// than --leader-election-renew-deadline makes controller-runtime exit the
// process on purpose (it can no longer prove it is the leader) and the
// kubelet would start it again; that path is covered by the failover tests.
func TestAPIServerRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Setenv("POD_NAMESPACE", systemNamespace)
	m := startManager(t, saKubeconfig, "--controllers=all")

	ns := createNamespace(t, "restart-"+suffix())
	createMemcached(g, ns, "before", 2)
	setConfigMap(g, ns, "settings", "1")
	g.Expect(k8s.Create(ctx, deployment(ns, "web", 2))).To(Succeed())
	g.Expect(k8s.Create(ctx, watchPolicy(ns, "web", "web", "settings"))).To(Succeed())
	g.Eventually(func(g Gomega) { memcachedSettled(g, ns, "before", 2) }, timeout, poll).Should(Succeed())
	waitBaseline(t, ns, "web")
	g.Eventually(func(g Gomega) { expectRestarts(g, ns, "web", "web", 0) }, timeout, poll).Should(Succeed())

	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	down, restarted, err := kc.RestartAPIServer(rctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kube-apiserver stopped (SIGTERM) and started again; back after %s; components restarted as a kubelet would: %v", down.Round(time.Millisecond), restarted)
	select {
	case <-m.Exited():
		t.Fatalf("the manager exited during the apiserver restart:\n%s", m.Logs())
	default:
	}

	start := time.Now()
	// The change comes at once, inside the window where the restarted
	// apiserver may still refuse the ServiceAccount (its RBAC caches not yet
	// synced): a restart whose status write is refused must not be made
	// twice.
	setConfigMap(g, ns, "settings", "2")
	g.Eventually(func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "before"}, &cachev1alpha1.Memcached{})
	}, timeout, poll).Should(Succeed())
	createMemcached(g, ns, "after", 3)
	var mc cachev1alpha1.Memcached
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "before"}, &mc)).To(Succeed())
	mc.Spec.Size = ptr.To(int32(3))
	g.Expect(k8s.Update(ctx, &mc)).To(Succeed())
	g.Eventually(func(g Gomega) { memcachedSettled(g, ns, "after", 3) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { memcachedSettled(g, ns, "before", 3) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { expectRestarts(g, ns, "web", "web", 1) }, timeout, poll).Should(Succeed())
	t.Logf("after the restart: new Memcached Available, scaled one settled and one target restarted within %s", time.Since(start).Round(time.Millisecond))
	g.Consistently(func(g Gomega) { expectRestarts(g, ns, "web", "web", 1) }, 5*time.Second, time.Second).Should(Succeed())
	select {
	case <-m.Exited():
		t.Fatalf("the manager exited:\n%s", m.Logs())
	default:
	}
}
