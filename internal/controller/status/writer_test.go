package status

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A Namespace stands in for a custom resource: it has a status subresource
// and conditions of the metav1 kind are not needed to show the writer's
// behaviour; its status.phase is the field under test.
func newServer(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Namespace{}).WithObjects(objs...).Build()
}

func get(t *testing.T, c client.Client, name string) *corev1.Namespace {
	t.Helper()
	var ns corev1.Namespace
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &ns); err != nil {
		t.Fatal(err)
	}
	return &ns
}

// The defect this package exists for: the cache still holds the status
// before the controller's previous write; the new status equals that stale
// value, so a merge patch against the cached copy leaves the field out and
// the server keeps the newer, wrong value. With the writer, the stale copy
// conflicts, the status is recomputed on a fresh read and the server ends
// right.
func TestStaleCopyNeverLeavesAStaleStatus(t *testing.T) {
	ctx := context.Background()
	want := corev1.NamespacePhase("") // what the world says now: equal to the stale value
	// setUp: the controller's previous write (Terminating) reached the
	// server, the cache still holds the copy from before it.
	setUp := func(w *Writer, server client.Client) *corev1.Namespace {
		stale := get(t, server, "x")
		mine := get(t, server, "x")
		if _, err := w.Update(ctx, mine, func() error { mine.Status.Phase = corev1.NamespaceTerminating; return nil }); err != nil {
			t.Fatal(err)
		}
		return stale
	}

	// Control, without the writer: a merge patch computed against the
	// cached copy leaves the field out and the server keeps the wrong value.
	server := newServer(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	stale := setUp(NewWriter(server, server, "test"), server)
	before := stale.DeepCopy()
	stale.Status.Phase = want
	if err := server.Status().Patch(ctx, stale, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, server, "x").Status.Phase; got == want {
		t.Fatal("control: the naive patch did not reproduce the stale status")
	}

	server = newServer(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	w := NewWriter(server, server, FieldOwner("test"))
	stale = setUp(w, server)
	written, err := w.Update(ctx, stale, func() error {
		stale.Status.Phase = want
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, server, "x").Status.Phase; got != want || !written {
		t.Fatalf("status %q after the writer (written %v), want %q", got, written, want)
	}
}

// A write by someone else between the read and the write conflicts; the
// status is recomputed on a fresh read.
func TestConflictRecomputesOnFreshData(t *testing.T) {
	ctx := context.Background()
	server := newServer(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	cached := get(t, server, "x")
	other := get(t, server, "x")
	other.Labels = map[string]string{"edited": "by someone"}
	if err := server.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(server, server, FieldOwner("test"))
	var sawLabel []bool
	written, err := w.Update(ctx, cached, func() error {
		sawLabel = append(sawLabel, cached.Labels["edited"] != "")
		cached.Status.Phase = corev1.NamespaceTerminating
		return nil
	})
	if err != nil || !written {
		t.Fatalf("written %v err %v", written, err)
	}
	if len(sawLabel) != 2 || sawLabel[0] || !sawLabel[1] {
		t.Fatalf("computations saw the edit: %v, want [false true]", sawLabel)
	}
}

func TestUnchangedStatusWritesNothing(t *testing.T) {
	var patches int
	base := newServer(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	c := interceptor.NewClient(base, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		patches++
		return c.SubResource(sub).Patch(ctx, obj, p, opts...)
	}})
	w := NewWriter(c, c, "test")
	ns := get(t, c, "x")
	written, err := w.Update(context.Background(), ns, func() error { return nil })
	if err != nil || written || patches != 0 {
		t.Fatalf("written %v, %d patches, err %v", written, patches, err)
	}
}

func TestUpdateGivesUpAfterAttempts(t *testing.T) {
	base := newServer(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	c := interceptor.NewClient(base, interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		return apierrors.NewConflict(corev1.Resource("namespaces"), "x", nil)
	}})
	w := NewWriter(c, c, "test")
	w.attempts = 3
	ns := get(t, c, "x")
	n := 0
	_, err := w.Update(context.Background(), ns, func() error { n++; ns.Status.Phase = corev1.NamespaceTerminating; return nil })
	if !apierrors.IsConflict(err) || n != 3 {
		t.Fatalf("err %v after %d computations, want a conflict after 3", err, n)
	}
}

func TestDeletedObjectIsNotAnError(t *testing.T) {
	c := newServer(t)
	w := NewWriter(c, c, "test")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", ResourceVersion: "1"}}
	written, err := w.Update(context.Background(), ns, func() error { ns.Status.Phase = corev1.NamespaceActive; return nil })
	if err != nil || written {
		t.Fatalf("written %v err %v", written, err)
	}
}

func TestConditionsUseTheInjectedClock(t *testing.T) {
	t0 := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	var list []metav1.Condition
	c := NewConditions(&list, 7, t0)
	c.True("Ready", "Fine", "all good")
	if got := list[0]; !got.LastTransitionTime.Time.Equal(t0) || got.ObservedGeneration != 7 {
		t.Fatalf("condition %+v", got)
	}
	// Same status an hour later: the transition time stays.
	later := NewConditions(&list, 8, t0.Add(time.Hour))
	later.True("Ready", "StillFine", "still good")
	if got := list[0]; !got.LastTransitionTime.Time.Equal(t0) || got.ObservedGeneration != 8 || got.Reason != "StillFine" {
		t.Fatalf("condition %+v", got)
	}
	later.False("Ready", "Broken", "")
	if got := list[0]; !got.LastTransitionTime.Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("transition not stamped: %+v", got)
	}
	before := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "A"}}
	for _, tc := range []struct {
		after []metav1.Condition
		want  bool
	}{
		{[]metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "A", Message: "other"}}, false},
		{[]metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "B"}}, true},
		{[]metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "A"}}, true},
		{nil, false},
	} {
		if got := Changed(before, tc.after, "Ready"); got != tc.want {
			t.Errorf("Changed(%v) = %v", tc.after, got)
		}
	}
	if !Changed(nil, before, "Ready") {
		t.Error("a new condition is not a change")
	}
}

func TestNames(t *testing.T) {
	if FieldOwner("memcached") != "runbook-memcached" || ReporterName("memcached") != "memcached-controller" {
		t.Fatal("naming convention changed")
	}
}
