package nsscaler

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// scheduledWorld is a reconciler on a fake apiserver that counts every
// write it receives, with a scheduled NSScaler and one Deployment.
type scheduledWorld struct {
	clock  *clocktesting.FakeClock
	server client.WithWatch
	r      *Reconciler
	mu     sync.Mutex
	writes []string
}

func newScheduledWorld(t *testing.T, start time.Time, spec scalingv1alpha1.NSScalerSpec) *scheduledWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	w := &scheduledWorld{clock: clocktesting.NewFakeClock(start)}
	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "nights", Finalizers: []string{Finalizer}}, Spec: spec}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "proj-a"}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "proj-a", Name: "web", UID: "web-uid"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	count := func(what string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.writes = append(w.writes, what)
	}
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&scalingv1alpha1.NSScaler{}).WithObjects(scaler, ns, d).Build()
	w.server = interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count("create " + obj.GetName())
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count("update " + obj.GetName())
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count("patch " + obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			count("patch " + obj.GetName() + "/" + sub)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count("update " + obj.GetName() + "/" + sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	r, err := newReconciler(dependencies{
		client: w.server,
		access: workloadAccess{cache: w.server, apiReader: w.server, patcher: newWorkloadPatcher(w.server)},
		status: status.NewWriter(w.server, w.server, status.FieldOwner(Name)),
	}, Options{Clock: w.clock, Metrics: testMetrics(t), WriteConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.r = r
	return w
}

// reconcile runs one reconcile at the clock's time and returns the writes
// it made; a periodic resync (RequeueAfter) fails the test.
func (w *scheduledWorld) reconcile(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	before := len(w.writes)
	w.mu.Unlock()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "nights"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 0 || res.Requeue { //nolint:staticcheck // Requeue is what a periodic resync would set
		t.Fatalf("reconcile at %s asked for a resync: %+v", w.clock.Now().UTC(), res)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes[before:]...)
}

func (w *scheduledWorld) replicas(t *testing.T) int32 {
	t.Helper()
	var d appsv1.Deployment
	if err := w.server.Get(context.Background(), client.ObjectKey{Namespace: "proj-a", Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// expectWakeup: the only reconcile arranged is at `at`, and stepping the
// clock there queues it.
func (w *scheduledWorld) expectWakeupAt(t *testing.T, at time.Time) {
	t.Helper()
	if got := w.r.wakeups.pending("nights"); !got.Equal(at) {
		t.Fatalf("next reconcile arranged for %s, want %s", got.UTC(), at.UTC())
	}
	select {
	case e := <-w.r.wakeups.events:
		t.Fatalf("a reconcile of %s was queued before its time", e.Object.GetName())
	default:
	}
	w.clock.SetTime(at)
	select {
	case e := <-w.r.wakeups.events:
		if e.Object.GetName() != "nights" {
			t.Fatalf("woke %s", e.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reconcile queued at %s", at.UTC())
	}
}

// The controller reconciles at the schedule's transitions and at no other
// time: no RequeueAfter, one timer on the injected clock for the next
// transition; reconciles between transitions (any event may cause one)
// write nothing at all — no workload, no status.
func TestRequeuesOnlyForTheNextTransition(t *testing.T) {
	// Monday 2026-11-30 19:30 in Berlin.
	w := newScheduledWorld(t, mustTime(t, "2026-11-30T18:30:00Z"), scalingv1alpha1.NSScalerSpec{
		NamespacePrefix: "proj-", Kinds: []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}},
		Schedule: &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")}}},
	})
	evening, morning := mustTime(t, "2026-11-30T19:00:00Z"), mustTime(t, "2026-12-01T07:00:00Z")

	if got := w.reconcile(t); len(got) != 1 || got[0] != "patch nights/status" {
		t.Fatalf("first reconcile wrote %v, want only its status", got)
	}
	for _, at := range []string{"2026-11-30T18:45:00Z", "2026-11-30T18:59:59Z"} {
		w.clock.SetTime(mustTime(t, at))
		if got := w.reconcile(t); len(got) != 0 {
			t.Fatalf("a reconcile at %s, before the window, wrote %v", at, got)
		}
	}
	w.expectWakeupAt(t, evening)
	if got := w.reconcile(t); len(got) != 2 || w.replicas(t) != 0 {
		t.Fatalf("the park at 20:00 wrote %v (replicas %d), want the Deployment and the status", got, w.replicas(t))
	}
	for _, at := range []string{"2026-11-30T19:00:01Z", "2026-12-01T01:00:00Z", "2026-12-01T06:59:59Z"} {
		w.clock.SetTime(mustTime(t, at))
		if got := w.reconcile(t); len(got) != 0 {
			t.Fatalf("a reconcile at %s, inside the window, wrote %v", at, got)
		}
	}
	w.expectWakeupAt(t, morning)
	if got := w.reconcile(t); len(got) != 2 || w.replicas(t) != 3 {
		t.Fatalf("the restore at 08:00 wrote %v (replicas %d)", got, w.replicas(t))
	}
	if got := w.r.wakeups.pending("nights"); !got.Equal(mustTime(t, "2026-12-01T19:00:00Z")) {
		t.Fatalf("after the restore the next reconcile is at %s", got.UTC())
	}
}

// Without a schedule nothing is due: no timer at all.
func TestNoScheduleArrangesNoReconcile(t *testing.T) {
	w := newScheduledWorld(t, mustTime(t, "2026-11-30T18:30:00Z"), scalingv1alpha1.NSScalerSpec{
		NamespacePrefix: "proj-", Kinds: []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}},
	})
	w.reconcile(t)
	if w.replicas(t) != 0 || !w.r.wakeups.pending("nights").IsZero() {
		t.Fatalf("replicas %d, wake-up at %s", w.replicas(t), w.r.wakeups.pending("nights"))
	}
	w.clock.Step(24 * time.Hour)
	if got := w.reconcile(t); len(got) != 0 {
		t.Fatalf("a day later a reconcile wrote %v", got)
	}
}
