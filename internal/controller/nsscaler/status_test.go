package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

var fakeNow = time.Unix(1000, 0)

// observedOn is obs as a reconcile of s would have made it.
func observedOn(s *scalingv1alpha1.NSScaler, obs observation) *observation {
	o := newObservation(s, fakeNow)
	obs.generation, obs.deleting, obs.suspended = o.generation, o.deleting, o.suspended
	return &obs
}

func TestComputeStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	parked := Plan{Parked: sets.New("a", "c"), Active: sets.New("b"), Foreign: sets.New[string](), Protected: sets.New[string]()}
	empty := Plan{Parked: sets.New[string](), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}
	type want struct {
		done     bool
		ready    string
		parked   string
		degraded string
	}
	tests := []struct {
		name    string
		suspend bool
		obs     observation
		want    want
	}{
		{"all parked, no pods", false, observation{plan: parked, parkedWorkloads: 4},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonAsExpected}},
		{"pods still terminating", false, observation{plan: parked, parkedWorkloads: 4, podsRemaining: 2},
			want{false, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonPodsRemaining, scalingv1alpha1.ReasonAsExpected}},
		{"parked to N: only the kept pods remain", false, observation{plan: parked, parkedWorkloads: 2, keptPods: 4, podsRemaining: 4},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonParkedReplicasRunning, scalingv1alpha1.ReasonAsExpected}},
		{"parked to N: more pods than kept", false, observation{plan: parked, parkedWorkloads: 2, keptPods: 4, podsRemaining: 7},
			want{false, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonPodsRemaining, scalingv1alpha1.ReasonAsExpected}},
		{"workloads in their grace period", false, observation{plan: parked, parkedWorkloads: 2, workloadsInGrace: 1,
			grace: map[string]*graceTally{"a": {workloads: 1, until: fakeNow.Add(time.Minute)}}},
			want{false, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonWorkloadsInGrace, scalingv1alpha1.ReasonAsExpected}},
		{"a write failed", false, observation{plan: parked, parkedWorkloads: 3, pendingTargets: 1, workloadErrs: []error{errors.New("boom")}},
			want{false, scalingv1alpha1.ReasonReconcileError, scalingv1alpha1.ReasonWorkloadsPending, scalingv1alpha1.ReasonWorkloadErrors}},
		{"suspended with unparked targets", true, observation{plan: parked, pendingTargets: 2},
			want{false, scalingv1alpha1.ReasonSuspended, scalingv1alpha1.ReasonWorkloadsPending, scalingv1alpha1.ReasonAsExpected}},
		{"nothing parked", false, observation{plan: empty},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonNothingParked, scalingv1alpha1.ReasonAsExpected}},
		{"conflict", false, observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New("x"), Protected: sets.New[string](),
			Conflicts: []scalingv1alpha1.NamespaceConflict{{Namespace: "x", Owner: "older"}}}},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonNamespaceConflict}},
		{"kind unavailable", false, observation{plan: parked, kindErrs: []error{errors.New("no Gadget")}},
			want{true, scalingv1alpha1.ReasonReconciled, scalingv1alpha1.ReasonAllPodsGone, scalingv1alpha1.ReasonKindUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 7}, Spec: scalingv1alpha1.NSScalerSpec{Suspend: tt.suspend}}
			st := computeStatus(s, observedOn(s, tt.obs), now)
			if st.ObservedGeneration != 7 || st.Done != tt.want.done {
				t.Fatalf("observedGeneration %d done %v, want 7 and %v", st.ObservedGeneration, st.Done, tt.want.done)
			}
			for typ, reason := range map[string]string{
				scalingv1alpha1.ConditionReady: tt.want.ready, scalingv1alpha1.ConditionParked: tt.want.parked, scalingv1alpha1.ConditionDegraded: tt.want.degraded,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Reason != reason || c.ObservedGeneration != 7 {
					t.Errorf("%s = %+v, want reason %s", typ, c, reason)
				}
			}
			if int(st.ParkedNamespaceCount) != len(st.ParkedNamespaces) || int(st.ActiveNamespaceCount) != len(st.ActiveNamespaces) {
				t.Errorf("counts do not match lists: %+v", st)
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimeWhenUnchanged(t *testing.T) {
	obs := observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}}
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1}}
	first := computeStatus(s, observedOn(s, obs), time.Unix(1000, 0))
	s.Status = first
	second := computeStatus(s, observedOn(s, obs), time.Unix(2000, 0))
	for _, c := range second.Conditions {
		if c.LastTransitionTime.Unix() != 1000 {
			t.Errorf("%s transition time moved to %v without a change", c.Type, c.LastTransitionTime)
		}
	}
}

func TestKindUnhandledBlocksOnlyWhatMayHideParkedObjects(t *testing.T) {
	widget := KindKey{Group: "test.runbook.dev", Kind: "Widget"}
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: widget.Group, Kind: widget.Kind}}
	tests := []struct {
		name             string
		previouslyParked bool
		err              error
		blocks           bool
	}{
		{"never parked, no scale subresource", false, errors.New("no scale subresource"), false},
		{"parked before, CRD gone", true, noMatch, false},
		{"parked before, cannot be read", true, errors.New("forbidden"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &observation{previouslyParked: sets.New[KindKey]()}
			if tt.previouslyParked {
				o.previouslyParked.Insert(widget)
			}
			o.kindUnhandled(widget, tt.err)
			if len(o.kindErrs) != 1 || (o.unrestorable == 1) != tt.blocks || (len(o.carried) == 1) != tt.blocks {
				t.Fatalf("observation %+v, want blocks=%v", o, tt.blocks)
			}
		})
	}
}

// staleCache is a reconciler on a fake apiserver whose "cache" (the client
// the reconciler reads NSScalers from) can be frozen: from then on it serves
// the NSScaler as it was, whatever the controller writes afterwards, as an
// informer that has not caught up with the controller's own status write.
type staleCache struct {
	server client.WithWatch
	frozen *scalingv1alpha1.NSScaler // nil: the cache is up to date
	clock  *clocktesting.FakeClock
	r      *Reconciler
}

func newStaleCache(t *testing.T, newWriter func(c client.Client, apiReader client.Reader) statusWriter) *staleCache {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	scaler := &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: "release", Finalizers: []string{Finalizer}},
		Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "proj-a"}}
	f := &staleCache{clock: clocktesting.NewFakeClock(fakeNow)}
	f.server = fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&scalingv1alpha1.NSScaler{}).WithObjects(scaler, ns).Build()
	cached := interceptor.NewClient(f.server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if s, ok := obj.(*scalingv1alpha1.NSScaler); ok && f.frozen != nil {
				f.frozen.DeepCopyInto(s)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if l, ok := list.(*scalingv1alpha1.NSScalerList); ok && f.frozen != nil {
				l.Items = []scalingv1alpha1.NSScaler{*f.frozen.DeepCopy()}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	r, err := newReconciler(dependencies{
		client: cached,
		access: workloadAccess{cache: f.server, apiReader: f.server, patcher: newWorkloadPatcher(f.server)},
		status: newWriter(cached, f.server),
	}, Options{Clock: f.clock, Metrics: testMetrics(t), WriteConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

func (f *staleCache) reconcile(t *testing.T) {
	t.Helper()
	f.clock.SetTime(f.clock.Now().Add(time.Minute))
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "release"}}); err != nil {
		t.Fatal(err)
	}
}

func (f *staleCache) serverStatus(t *testing.T) scalingv1alpha1.NSScalerStatus {
	t.Helper()
	var s scalingv1alpha1.NSScaler
	if err := f.server.Get(context.Background(), types.NamespacedName{Name: "release"}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Status
}

// run is the defect's sequence: a pod appears in the parked namespace and a
// reconcile writes podsRemaining 1, which the cache never sees; the pod goes
// and the next reconcile computes podsRemaining 0 — equal to the stale
// cached value. It returns the status the server ends with.
func (f *staleCache) run(t *testing.T) scalingv1alpha1.NSScalerStatus {
	t.Helper()
	ctx := context.Background()
	f.reconcile(t) // no pod: podsRemaining 0, Parked AllPodsGone
	f.frozen = &scalingv1alpha1.NSScaler{}
	if err := f.server.Get(ctx, types.NamespacedName{Name: "release"}, f.frozen); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "proj-a", Name: "web-1"}}
	if err := f.server.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	if got := f.serverStatus(t); got.PodsRemaining != 1 || got.Done {
		t.Fatalf("setup: the write the cache misses did not happen: podsRemaining %d done %v", got.PodsRemaining, got.Done)
	}
	if err := f.server.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t) // on the cached copy from before the previous write
	return f.serverStatus(t)
}

// mergePatchWriter is the status write this package had before
// status.Writer (the old writeStatus): nothing when the computed status
// equals the cached copy's, otherwise a merge patch computed against that
// copy, without a resourceVersion.
type mergePatchWriter struct{ client client.Client }

func (w mergePatchWriter) Update(ctx context.Context, obj client.Object, compute func() error) (bool, error) {
	cached := obj.DeepCopyObject().(client.Object)
	if err := compute(); err != nil {
		return false, err
	}
	if equality.Semantic.DeepEqual(cached, obj) {
		return false, nil
	}
	return true, w.client.Status().Patch(ctx, obj, client.MergeFrom(cached), client.FieldOwner(status.FieldOwner(Name)))
}

func (mergePatchWriter) Forget(types.NamespacedName) {}

func describeStatus(st scalingv1alpha1.NSScalerStatus) string {
	c := meta.FindStatusCondition(st.Conditions, scalingv1alpha1.ConditionParked)
	if c == nil {
		return fmt.Sprintf("podsRemaining=%d done=%v Parked=<none>", st.PodsRemaining, st.Done)
	}
	return fmt.Sprintf("podsRemaining=%d done=%v Parked=%s/%s", st.PodsRemaining, st.Done, c.Status, c.Reason)
}

// TestStatusIsRightWhenTheCacheMissedTheLastStatusWrite is the stale-status
// defect, deterministically: two back-to-back reconciles, the second on the
// NSScaler as it was before the first one's status write. The server must
// end with the status of what the last reconcile observed. The control
// (the old merge patch against the cached copy) shows the defect: the
// fields equal to the stale copy are left out, and the server keeps the
// older, wrong values.
func TestStatusIsRightWhenTheCacheMissedTheLastStatusWrite(t *testing.T) {
	control := newStaleCache(t, func(c client.Client, _ client.Reader) statusWriter { return mergePatchWriter{client: c} }).run(t)
	if control.PodsRemaining == 0 {
		t.Fatalf("control: the old merge patch did not reproduce the defect: %s", describeStatus(control))
	}
	t.Logf("control, the old merge patch against the cached copy: the server kept %s", describeStatus(control))

	got := newStaleCache(t, func(c client.Client, apiReader client.Reader) statusWriter {
		return status.NewWriter(c, apiReader, status.FieldOwner(Name))
	}).run(t)
	parked := meta.FindStatusCondition(got.Conditions, scalingv1alpha1.ConditionParked)
	if got.PodsRemaining != 0 || !got.Done || parked == nil || parked.Status != metav1.ConditionTrue || parked.Reason != scalingv1alpha1.ReasonAllPodsGone {
		t.Fatalf("the server ended with %s, want podsRemaining=0 done=true Parked=True/%s", describeStatus(got), scalingv1alpha1.ReasonAllPodsGone)
	}
	if !parked.LastTransitionTime.Time.Equal(fakeNow.Add(3 * time.Minute)) {
		t.Errorf("Parked transition at %v, want the third reconcile's time %v", parked.LastTransitionTime.Time, fakeNow.Add(3*time.Minute))
	}
}

// The status writer may compute the status onto a fresher copy than the one
// the reconcile acted on (after a conflict, or when the cache is behind): the
// status still describes what was acted on, so a spec edited meanwhile is
// not reported as observed before a reconcile has acted on it.
func TestComputeStatusReportsTheGenerationActedOn(t *testing.T) {
	actedOn := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 7}}
	obs := observedOn(actedOn, observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}})
	fresher := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 8}, Spec: scalingv1alpha1.NSScalerSpec{Suspend: true}}
	st := computeStatus(fresher, obs, fakeNow)
	if st.ObservedGeneration != 7 {
		t.Fatalf("observedGeneration %d, want 7", st.ObservedGeneration)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 7 {
			t.Errorf("%s observedGeneration %d, want 7", c.Type, c.ObservedGeneration)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, scalingv1alpha1.ConditionReady); c == nil || c.Reason != scalingv1alpha1.ReasonReconciled {
		t.Errorf("Ready %+v: the suspend of generation 8 was not acted on yet", c)
	}
}

// Setup's status writer (status.NewReporting, by Name) and the workload
// patches (FieldManager) must write as one field manager.
func TestFieldManagerIsTheKits(t *testing.T) {
	if FieldManager != status.FieldOwner(Name) || FieldManager != "runbook-nsscaler" {
		t.Errorf("field manager %q, want status.FieldOwner(%q) = runbook-nsscaler", FieldManager, Name)
	}
}
