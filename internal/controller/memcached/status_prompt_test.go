package memcached

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Through Reconcile, on the way from creation to a settled scale-up: each
// reconcile that sees a change writes it before it returns (no requeue to
// write it later), and a reconcile that sees nothing new writes nothing.
func TestEveryReconcileWritesWhatItSawAtOnce(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC))
	r := lc.newReconciler(clk, nil)

	// reconcileAndCheck runs one reconcile and checks that it returned no
	// requeue and left the stored status as want says, written or not.
	reconcileAndCheck := func(step string, wantWrite bool, want func(st *cachev1alpha1.MemcachedStatus) bool) {
		t.Helper()
		before := lc.memcached(t, key).ResourceVersion
		if res := reconcileOnce(t, r, key); res.RequeueAfter != 0 {
			t.Fatalf("%s: requeue after %v, want none", step, res.RequeueAfter)
		}
		mc := lc.memcached(t, key)
		if wrote := mc.ResourceVersion != before; wrote != wantWrite {
			t.Fatalf("%s: wrote %v, want %v (status %+v)", step, wrote, wantWrite, mc.Status)
		}
		if !want(&mc.Status) {
			t.Fatalf("%s: status not written by the reconcile that saw it: %+v", step, mc.Status)
		}
	}

	reconcileAndCheck("created", true, func(st *cachev1alpha1.MemcachedStatus) bool {
		return meta.IsStatusConditionTrue(st.Conditions, cachev1alpha1.ConditionProgressing)
	})
	reconcileAndCheck("nothing new", false, func(*cachev1alpha1.MemcachedStatus) bool { return true })

	lc.setDeploymentStatus(t, key, 2, 1)
	reconcileAndCheck("one ready", true, func(st *cachev1alpha1.MemcachedStatus) bool {
		return st.Replicas == 2 && st.ReadyReplicas == 1
	})
	setReadyEndpoints(t, lc, key, "10.0.0.1")
	reconcileAndCheck("its endpoint", true, func(st *cachev1alpha1.MemcachedStatus) bool {
		return len(st.Servers) == 1 && st.Servers[0] == "10.0.0.1:11211"
	})

	lc.setDeploymentStatus(t, key, 2, 2)
	setReadyEndpoints(t, lc, key, "10.0.0.1", "10.0.0.2")
	reconcileAndCheck("both ready", true, func(st *cachev1alpha1.MemcachedStatus) bool {
		return st.ReadyReplicas == 2 && len(st.Servers) == 2 &&
			meta.IsStatusConditionTrue(st.Conditions, cachev1alpha1.ConditionAvailable)
	})
	clk.SetTime(clk.Now().Add(time.Hour))
	reconcileAndCheck("nothing new an hour later", false, func(*cachev1alpha1.MemcachedStatus) bool { return true })
}

// setReadyEndpoints plays the EndpointSlice controller: the owned Service's
// slice lists addrs as ready.
func setReadyEndpoints(t *testing.T, lc *laggingCache, key client.ObjectKey, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-x", Labels: map[string]string{
			discoveryv1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: endpointSliceControllerName,
			labelManagedBy: managedByValue}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("memcache"), Port: ptr.To[int32](11211)}},
	}
	for _, a := range addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	existing := &discoveryv1.EndpointSlice{}
	if err := lc.server.Get(ctx, client.ObjectKeyFromObject(slice), existing); err == nil {
		slice.ResourceVersion = existing.ResourceVersion
		if err := lc.server.Update(ctx, slice); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := lc.server.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
}
