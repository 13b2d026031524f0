package memcached

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Through Reconcile: a status on the way is held back for the window and
// written by the requeued reconcile; the settled one is written at once.
func TestReconcileCoalescesPassingStatuses(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC))
	r := lc.newReconciler(clk, nil)
	r.pacer = newStatusPacer()

	res := reconcileOnce(t, r, key) // creates the Deployment; status held back
	if res.RequeueAfter != coalesceWindow {
		t.Fatalf("first reconcile: requeue after %v, want %v", res.RequeueAfter, coalesceWindow)
	}
	if got := lc.memcached(t, key).Status.Conditions; len(got) != 0 {
		t.Fatalf("status written within the window: %+v", got)
	}
	clk.SetTime(clk.Now().Add(coalesceWindow))
	if res := reconcileOnce(t, r, key); res.RequeueAfter != 0 {
		t.Fatalf("requeued reconcile: requeue after %v, want none", res.RequeueAfter)
	}
	if !meta.IsStatusConditionTrue(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionProgressing) {
		t.Fatalf("the held status was not written when due: %+v", lc.memcached(t, key).Status)
	}
}
