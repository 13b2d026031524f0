package nsscaler

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestTrackerObservedDropsCaughtUpWritesAndTellsOwnOnes(t *testing.T) {
	for _, tt := range []struct {
		name      string
		written   string // the resourceVersion the controller wrote ("" none)
		observed  string // the resourceVersion of the update the cache applied
		wantOwn   bool
		wantEntry bool // the written state is still remembered afterwards
	}{
		{name: "nothing written", observed: "7"},
		{name: "the own write", written: "7", observed: "7", wantOwn: true},
		{name: "an older update, before the write reached the cache", written: "7", observed: "5", wantEntry: true},
		{name: "a newer update by someone else", written: "7", observed: "9"},
		{name: "resourceVersions that do not compare", written: "7", observed: "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "awaiting"})
			tr := newWriteTracker(g)
			if tt.written != "" {
				tr.record(Workload{Kind: kindDeployment, UID: "u", ResourceVersion: tt.written})
			}
			if own := tr.observed("u", tt.observed); own != tt.wantOwn {
				t.Errorf("own = %v, want %v", own, tt.wantOwn)
			}
			if got := gaugeValue(t, g) == 1; got != tt.wantEntry {
				t.Errorf("entry kept = %v, want %v", got, tt.wantEntry)
			}
		})
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// The awaiting-cache gauge follows every way an entry comes and goes.
func TestTrackerGaugeCountsWritesAwaitingTheCache(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "awaiting"})
	tr := newWriteTracker(g)
	want := func(step string, n float64) {
		t.Helper()
		if got := gaugeValue(t, g); got != n {
			t.Errorf("after %s: gauge %v, want %v", step, got, n)
		}
	}
	for _, uid := range []types.UID{"a", "b", "c", "d"} {
		tr.record(Workload{Kind: kindDeployment, UID: uid, ResourceVersion: "10"})
	}
	want("four writes", 4)
	tr.record(Workload{Kind: kindDeployment, UID: "a", ResourceVersion: "11"})
	want("a second write of one workload", 4)
	tr.observed("b", "10")
	want("the cache delivering one write", 3)
	tr.observed("c", "9")
	want("an older update", 3)
	if _, known := tr.freshest(Workload{Kind: kindDeployment, UID: "c", ResourceVersion: "12"}); !known {
		t.Error("freshest does not know a tracked write")
	}
	want("a reconcile reading a newer cached copy", 2)
	tr.forget(map[types.UID]struct{}{"a": {}, "d": {}, "zz": {}})
	want("the workloads' deletion", 0)
}

func TestNotOwnWriteFiltersOnlyTheEchoOfOwnWrites(t *testing.T) {
	deploy := func(uid, rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: types.UID(uid), ResourceVersion: rv}}
	}
	for _, tt := range []struct {
		name    string
		written *Workload
		newObj  *appsv1.Deployment
		want    bool
	}{
		{name: "an update nobody here wrote", newObj: deploy("u", "3"), want: true},
		{name: "the echo of the park", written: &Workload{UID: "u", ResourceVersion: "3"}, newObj: deploy("u", "3"), want: false},
		{name: "someone scaled it up after the park", written: &Workload{UID: "u", ResourceVersion: "3"}, newObj: deploy("u", "4"), want: true},
		{name: "another workload", written: &Workload{UID: "u", ResourceVersion: "3"}, newObj: deploy("v", "3"), want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := testReconciler(t)
			if tt.written != nil {
				r.tracker.record(*tt.written)
			}
			got := r.notOwnWrite().Update(event.UpdateEvent{ObjectOld: deploy("u", "2"), ObjectNew: tt.newObj})
			if got != tt.want {
				t.Errorf("update passes = %v, want %v", got, tt.want)
			}
			if r.notOwnWrite().Create(event.CreateEvent{Object: tt.newObj}) != true {
				t.Error("a creation must always pass")
			}
		})
	}
}

// countingHandler parks everything, counting the writes in flight.
type countingHandler struct {
	fakeHandler
	mu             sync.Mutex
	inFlight, most int
	release        chan struct{}
}

func (c *countingHandler) park(_ context.Context, w Workload, _ *Original, _ int32) (Workload, error) {
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	c.mu.Unlock()
	<-c.release
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
	if w.Name == "gone" {
		return Workload{}, apierrors.NewNotFound(schema.GroupResource{Resource: "deployments"}, w.Name)
	}
	if w.Name == "denied" {
		return Workload{}, apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, w.Name, errors.New("no"))
	}
	w.Replicas = 0
	return w, nil
}

func TestWritePoolBoundsConcurrencyAndKeepsEveryOutcome(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		names                   []string
		wantDone, wantErr, none int
	}{
		{name: "nothing to write starts no writer"},
		{name: "one", names: []string{"a"}, wantDone: 1},
		{name: "more than the concurrency", names: []string{"a", "b", "c", "d", "e", "f", "g"}, wantDone: 7},
		{name: "gone and refused ones", names: []string{"a", "gone", "denied", "b"}, wantDone: 2, wantErr: 1, none: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := testReconciler(t) // WriteConcurrency 2
			p := testPass()
			h := &countingHandler{release: make(chan struct{})}
			close(h.release)
			wp := r.newWritePool(context.Background(), p)
			for i, name := range tt.names {
				w := Workload{Kind: kindDeployment, Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1", Replicas: int32(i + 1)}
				d, err := Decide(w, p.plan, p.kinds, p.self)
				if err != nil {
					t.Fatal(err)
				}
				wp.submit(job{h: h, w: w, d: d})
			}
			outcomes := wp.wait()
			if len(outcomes) != len(tt.names) {
				t.Fatalf("%d outcomes, want %d", len(outcomes), len(tt.names))
			}
			var done, failed, none int
			for _, o := range outcomes {
				switch {
				case o.err != nil:
					failed++
				case o.done == ActionPark:
					done++
				default:
					none++
				}
				if o.namespace != "ns" || o.kind != kindDeployment {
					t.Errorf("outcome %+v lost its workload's namespace or kind", o)
				}
			}
			if done != tt.wantDone || failed != tt.wantErr || none != tt.none {
				t.Errorf("parked %d failed %d none %d, want %d %d %d", done, failed, none, tt.wantDone, tt.wantErr, tt.none)
			}
			if h.most > r.writeConcurrency {
				t.Errorf("%d writes in flight, want at most %d", h.most, r.writeConcurrency)
			}
			if got := int(gaugeValue(t, r.metrics.WritesAwaitingCache)); got != tt.wantDone {
				t.Errorf("%d writes tracked, want the %d that succeeded", got, tt.wantDone)
			}
		})
	}
}

// listedHandler lists fixed workloads; during lists it calls during with
// each one (a write of the pass being recorded while it still lists).
type listedHandler struct {
	fakeHandler
	kind   KindKey
	listed []Workload
	during func(Workload)
	// cache is what the cache holds now, by namespace/name.
	cache map[string]Workload
}

func (h *listedHandler) key() KindKey { return h.kind }
func (h *listedHandler) cached(_ context.Context, namespace, name string) (Workload, bool, error) {
	w, ok := h.cache[namespace+"/"+name]
	return w, ok, nil
}
func (h *listedHandler) each(_ context.Context, fn func(Workload)) error {
	for _, w := range h.listed {
		fn(w)
		if h.during != nil {
			h.during(w)
		}
	}
	return nil
}

func TestEachFreshPrefersOwnWritesAndForgetsOnlyGoneObjects(t *testing.T) {
	r := testReconciler(t)
	tr := r.tracker
	tr.record(Workload{Kind: kindDeployment, UID: "newer", ResourceVersion: "10", HasAnnotation: true})
	tr.record(Workload{Kind: kindDeployment, UID: "gone", ResourceVersion: "4"})
	tr.record(Workload{Kind: kindStatefulSet, UID: "other-kind", ResourceVersion: "4"})
	h := &listedHandler{kind: kindDeployment, listed: []Workload{
		{Kind: kindDeployment, UID: "newer", ResourceVersion: "9"},
		{Kind: kindDeployment, UID: "written-now", ResourceVersion: "3"},
	}}
	// The pass parks written-now while the list goes on.
	h.during = func(w Workload) {
		if w.UID == "written-now" {
			tr.record(Workload{Kind: kindDeployment, UID: "written-now", ResourceVersion: "5"})
		}
	}
	got := map[types.UID]string{}
	if err := r.eachFresh(context.Background(), h, func(w Workload) { got[w.UID] = w.ResourceVersion }); err != nil {
		t.Fatal(err)
	}
	if got["newer"] != "10" || got["written-now"] != "3" || len(got) != 2 {
		t.Fatalf("listed %v, want newer at its written 10 and written-now as cached", got)
	}
	for uid, want := range map[types.UID]bool{"newer": true, "gone": false, "written-now": true, "other-kind": true} {
		if _, kept := tr.written[uid]; kept != want {
			t.Errorf("entry %s kept %v, want %v", uid, kept, want)
		}
	}
}

// A pass lists at the pace of its writes: the watch may deliver a write of
// an earlier pass (and the tracker forget it) after the object was listed.
// The listed copy then predates that write; deciding on it wrote the same
// change twice (1,002 writes for 1,000 Deployments in a benchmark round).
func TestEachFreshRereadsAnObjectWhoseWriteArrivedAfterItWasListed(t *testing.T) {
	r := testReconciler(t)
	tr := r.tracker
	tr.record(Workload{Kind: kindDeployment, Namespace: "ns", Name: "late", UID: "late", ResourceVersion: "10", HasAnnotation: true})
	h := &listedHandler{kind: kindDeployment, listed: []Workload{
		{Kind: kindDeployment, Namespace: "ns", Name: "first", UID: "first", ResourceVersion: "3"},
		{Kind: kindDeployment, Namespace: "ns", Name: "late", UID: "late", ResourceVersion: "9", Replicas: 3},
	}, cache: map[string]Workload{
		"ns/late": {Kind: kindDeployment, Namespace: "ns", Name: "late", UID: "late", ResourceVersion: "10", HasAnnotation: true},
	}}
	h.during = func(w Workload) {
		if w.UID == "first" {
			if !tr.observed("late", "10") {
				t.Error("the write was not taken for the controller's own")
			}
		}
	}
	got := map[types.UID]Workload{}
	if err := r.eachFresh(context.Background(), h, func(w Workload) { got[w.UID] = w }); err != nil {
		t.Fatal(err)
	}
	if w := got["late"]; w.ResourceVersion != "10" || !w.HasAnnotation {
		t.Fatalf("decided on %+v, want the cached copy with the write (resourceVersion 10)", w)
	}
	if got["first"].ResourceVersion != "3" {
		t.Fatalf("an object without a tracked write was not taken as listed: %+v", got["first"])
	}
}

// The handlers' cached reads (without informers: the cache reader) give
// the object as the cache holds it, and found=false for one it does not.
func TestHandlersReadOneObjectFromTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1",
		Annotations: map[string]string{AnnotationOriginal: `{"replicas":3}`}}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}}
	sts := &unstructured.Unstructured{}
	sts.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	sts.SetNamespace("ns")
	sts.SetName("db")
	sts.SetUID("u2")
	if err := unstructured.SetNestedField(sts.Object, int64(4), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(d, sts).Build()
	a := workloadAccess{cache: c}
	scale := &scaleHandler{workloadAccess: a, kind: kindStatefulSet, gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), replicasPath: []string{"spec", "replicas"}}
	cases := []struct {
		name     string
		h        kindHandler
		obj      string
		wantUID  types.UID
		replicas int32
	}{
		{"built-in kind", newDeploymentHandler(a), "web", "u1", 0},
		{"built-in kind, not cached", newDeploymentHandler(a), "gone", "", 0},
		{"scale subresource kind", scale, "db", "u2", 4},
		{"scale subresource kind, not cached", scale, "gone", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, found, err := tc.h.cached(context.Background(), "ns", tc.obj)
			if err != nil || found != (tc.wantUID != "") {
				t.Fatalf("found %v, err %v", found, err)
			}
			if w.UID != tc.wantUID || w.Replicas != tc.replicas {
				t.Fatalf("read %+v, want uid %q replicas %d", w, tc.wantUID, tc.replicas)
			}
		})
	}
	if w, _, _ := newDeploymentHandler(a).cached(context.Background(), "ns", "web"); !w.HasAnnotation {
		t.Fatalf("the original annotation was not read: %+v", w)
	}
}
