package memcached

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

// A manager that starts again finds the workloads it applied before in
// place and writes nothing, also for a warm-restart Memcached whose
// container stopSignal the apiserver drops (the ContainerStopSignals
// feature is off here, TestWarmRestartPodIsAdmitted): the new manager
// knows nothing of the old one's applies, and its first reconcile must not
// mistake the missing field for drift (no apply, no DriftCorrected event).
func TestRestartedManagerDoesNotReapply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	specs := map[string]cachev1alpha1.MemcachedSpec{
		"warm":  {WarmRestart: true},
		"plain": {},
		"sts":   {WarmRestart: true, WorkloadKind: cachev1alpha1.WorkloadStatefulSet},
	}
	for name, spec := range specs {
		create(t, newMemcached(ns, name, spec))
	}
	for name := range specs {
		eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for name, spec := range specs {
			var obj client.Object = &appsv1.Deployment{}
			if spec.WorkloadKind == cachev1alpha1.WorkloadStatefulSet {
				obj = &appsv1.StatefulSet{}
			}
			g.Expect(env.client.Get(ctx, key(ns, name), obj)).To(Succeed())
			out[name] = obj.GetResourceVersion()
		}
		return out
	}
	before := versions()

	restarted, writes := restartedManager(t, ns)
	for name := range specs {
		_, err := restarted.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, name)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesTo(writes.since(0), "/namespaces/"+ns+"/")).To(BeEmpty(), "the restarted manager wrote")
	g.Expect(versions()).To(Equal(before))
	t.Logf("dry runs of the restarted manager: %v", writes.dryRunsSince(0))

	// Its later reconciles remember what it found: not even a dry run.
	// (The reconciles are the test's, one at a time: nothing else runs them.)
	mark := writes.dryRunCount()
	for name := range specs {
		_, err := restarted.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, name)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writes.dryRunsSince(mark)).To(BeEmpty())
	g.Expect(writesTo(writes.since(0), "/namespaces/"+ns+"/")).To(BeEmpty(), "the restarted manager wrote")

	var evs eventsv1.EventList
	g.Expect(env.client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	g.Expect(evs.Items).NotTo(ContainElement(HaveField("Reason", cachev1alpha1.EventDriftCorrected)))
}

// restartedManager is what a manager process that starts again has: the
// controller built anew (nothing remembered) on a cache of its own, as the
// suite's manager identity, seeing only namespace ns and counting its own
// writes. Only the cache runs: the test calls Reconcile itself, so that it
// knows when the first reconciles are done. It stops when the test ends.
func restartedManager(t *testing.T, ns string) (*mccontroller.Reconciler, *writeCounter) {
	t.Helper()
	writes := &writeCounter{}
	cfg := rest.CopyConfig(env.managerConfig)
	cfg.Wrap(writes.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// The suite's manager runs a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := mccontroller.Setup(mgr, mccontroller.Options{SecretRecheck: secretRecheck, SecretResync: 2 * secretRecheck})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.GetCache().Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the second manager's cache: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the second manager did not stop within a minute")
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the second manager's cache did not sync")
	}
	return r, writes
}
