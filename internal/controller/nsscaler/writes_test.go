package nsscaler

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeHandler scripts the apiserver's answers for one workload.
type fakeHandler struct {
	parkErrs []error  // returned by successive park calls (nil: success)
	fresh    Workload // what get returns after a conflict
	parks    []*Original
	restores []Original
}

func (f *fakeHandler) key() KindKey { return kindDeployment }
func (f *fakeHandler) objectKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
}
func (f *fakeHandler) each(context.Context, func(Workload)) error { return nil }
func (f *fakeHandler) get(context.Context, string, string) (Workload, bool, error) {
	return f.fresh, true, nil
}
func (f *fakeHandler) cached(context.Context, string, string) (Workload, bool, error) {
	return Workload{}, false, nil
}
func (f *fakeHandler) park(_ context.Context, w Workload, record *Original, replicas int32) (Workload, error) {
	f.parks = append(f.parks, record)
	if len(f.parkErrs) > 0 {
		err := f.parkErrs[0]
		f.parkErrs = f.parkErrs[1:]
		if err != nil {
			return Workload{}, err
		}
	}
	w.Replicas = replicas
	return w, nil
}
func (f *fakeHandler) restore(_ context.Context, w Workload, orig Original) (Workload, error) {
	f.restores = append(f.restores, orig)
	return w, nil
}

func testReconciler(t *testing.T) *Reconciler {
	t.Helper()
	r, err := newReconciler(dependencies{}, Options{Metrics: testMetrics(t), Clock: clocktesting.NewFakeClock(fakeNow), WriteConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testPass is the workload pass of an NSScaler "me" parking namespace ns.
func testPass() *workloadPass {
	return &workloadPass{
		self: "me", plan: Plan{Parked: sets.New("ns"), Active: sets.New[string](), Foreign: sets.New[string]()},
		kinds: sets.New(kindDeployment), act: true, obs: &observation{now: fakeNow}, parkedKinds: sets.New[KindKey](),
		now: fakeNow, fights: newFightTracker(FightPolicy{}), targets: map[types.UID]struct{}{}, dryTallies: map[string]*namespaceTally{},
	}
}

func TestConflictIsRetriedOnFreshStateWithoutOverwritingAnOriginal(t *testing.T) {
	r := testReconciler(t)
	p := testPass()
	stale := Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "1", Replicas: 3}
	// Meanwhile someone (an earlier run) recorded 3 and a user scaled to 5.
	h := &fakeHandler{
		parkErrs: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("changed"))},
		fresh: Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "2", Replicas: 5,
			Annotation: ReplicasOriginal(3, "me").Encode(), HasAnnotation: true},
	}
	d, err := Decide(stale, p.plan, p.kinds, p.self)
	if err != nil || d.Record == nil {
		t.Fatalf("decision %+v, %v", d, err)
	}
	o := r.writeWorkload(context.Background(), p, job{h: h, w: stale, d: d})
	if o.err != nil || o.done != ActionPark {
		t.Fatalf("outcome %+v", o)
	}
	if len(h.parks) != 2 || h.parks[0] == nil || h.parks[1] != nil {
		t.Fatalf("parks %v: want a recording park, then after the conflict a re-park that leaves the recorded original alone", h.parks)
	}
}

func TestPersistentConflictBecomesAnError(t *testing.T) {
	r := testReconciler(t)
	p := testPass()
	w := Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", Replicas: 2}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("changed"))
	h := &fakeHandler{fresh: w}
	for i := 0; i <= maxConflictRetries; i++ {
		h.parkErrs = append(h.parkErrs, conflict)
	}
	d, _ := Decide(w, p.plan, p.kinds, p.self)
	o := r.writeWorkload(context.Background(), p, job{h: h, w: w, d: d})
	if o.err == nil || !apierrors.IsConflict(errors.Unwrap(o.err)) {
		t.Fatalf("outcome %+v, want the conflict reported", o)
	}
	if len(h.parks) != maxConflictRetries+1 {
		t.Fatalf("%d attempts, want %d", len(h.parks), maxConflictRetries+1)
	}
}

func TestOneFailingWorkloadDoesNotStopTheOthers(t *testing.T) {
	r := testReconciler(t)
	p := testPass()
	var jobs []job
	for i, err := range []error{nil, apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "b", errors.New("denied")), nil} {
		w := Workload{Kind: kindDeployment, Namespace: "ns", Name: string(rune('a' + i)), Replicas: 1}
		d, _ := Decide(w, p.plan, p.kinds, p.self)
		jobs = append(jobs, job{h: &fakeHandler{parkErrs: []error{err}}, w: w, d: d})
	}
	outcomes := r.runJobs(context.Background(), p, jobs)
	var ok, failed int
	for _, o := range outcomes {
		if o.err != nil {
			failed++
		} else if o.done == ActionPark {
			ok++
		}
	}
	if ok != 2 || failed != 1 {
		t.Fatalf("parked %d failed %d, want 2 and 1", ok, failed)
	}
}
