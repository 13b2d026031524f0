package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// fakeHandler scripts the apiserver's answers for one workload.
type fakeHandler struct {
	parkErrs []error  // returned by successive park calls (nil: success)
	fresh    Workload // what get returns after a conflict
	parks    []*Original
	restores []Original
}

func (f *fakeHandler) key() KindKey                             { return kindDeployment }
func (f *fakeHandler) list(context.Context) ([]Workload, error) { return nil, nil }
func (f *fakeHandler) get(context.Context, string, string) (Workload, bool, error) {
	return f.fresh, true, nil
}
func (f *fakeHandler) park(_ context.Context, w Workload, record *Original) (Workload, error) {
	f.parks = append(f.parks, record)
	if len(f.parkErrs) > 0 {
		err := f.parkErrs[0]
		f.parkErrs = f.parkErrs[1:]
		if err != nil {
			return Workload{}, err
		}
	}
	w.Replicas = 0
	return w, nil
}
func (f *fakeHandler) restore(_ context.Context, w Workload, orig Original) (Workload, error) {
	f.restores = append(f.restores, orig)
	return w, nil
}

func testReconciler(t *testing.T) *Reconciler {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &Reconciler{Metrics: m, Clock: clocktesting.NewFakePassiveClock(fakeNow), WriteConcurrency: 2, tracker: newWriteTracker()}
}

func TestConflictIsRetriedOnFreshStateWithoutOverwritingAnOriginal(t *testing.T) {
	r := testReconciler(t)
	plan := Plan{Parked: sets.New("ns"), Active: sets.New[string](), Foreign: sets.New[string]()}
	kinds := sets.New(kindDeployment)
	stale := Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "1", Replicas: 3}
	// Meanwhile someone (an earlier run) recorded 3 and a user scaled to 5.
	h := &fakeHandler{
		parkErrs: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("changed"))},
		fresh: Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", UID: "u", ResourceVersion: "2", Replicas: 5,
			Annotation: ReplicasOriginal(3, "me").Encode(), HasAnnotation: true},
	}
	d, err := Decide(stale, plan, kinds, "me")
	if err != nil || d.Record == nil {
		t.Fatalf("decision %+v, %v", d, err)
	}
	o := r.writeWorkload(context.Background(), "me", plan, kinds, job{h: h, w: stale, d: d})
	if o.err != nil || o.done != ActionPark {
		t.Fatalf("outcome %+v", o)
	}
	if len(h.parks) != 2 || h.parks[0] == nil || h.parks[1] != nil {
		t.Fatalf("parks %v: want a recording park, then after the conflict a re-park that leaves the recorded original alone", h.parks)
	}
}

func TestPersistentConflictBecomesAnError(t *testing.T) {
	r := testReconciler(t)
	plan := Plan{Parked: sets.New("ns"), Active: sets.New[string](), Foreign: sets.New[string]()}
	kinds := sets.New(kindDeployment)
	w := Workload{Kind: kindDeployment, Namespace: "ns", Name: "web", Replicas: 2}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("changed"))
	h := &fakeHandler{fresh: w}
	for i := 0; i <= maxConflictRetries; i++ {
		h.parkErrs = append(h.parkErrs, conflict)
	}
	d, _ := Decide(w, plan, kinds, "me")
	o := r.writeWorkload(context.Background(), "me", plan, kinds, job{h: h, w: w, d: d})
	if o.err == nil || !apierrors.IsConflict(errors.Unwrap(o.err)) {
		t.Fatalf("outcome %+v, want the conflict reported", o)
	}
	if len(h.parks) != maxConflictRetries+1 {
		t.Fatalf("%d attempts, want %d", len(h.parks), maxConflictRetries+1)
	}
}

func TestOneFailingWorkloadDoesNotStopTheOthers(t *testing.T) {
	r := testReconciler(t)
	plan := Plan{Parked: sets.New("ns"), Active: sets.New[string](), Foreign: sets.New[string]()}
	kinds := sets.New(kindDeployment)
	var jobs []job
	for i, err := range []error{nil, apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "b", errors.New("denied")), nil} {
		w := Workload{Kind: kindDeployment, Namespace: "ns", Name: string(rune('a' + i)), Replicas: 1}
		d, _ := Decide(w, plan, kinds, "me")
		jobs = append(jobs, job{h: &fakeHandler{parkErrs: []error{err}}, w: w, d: d})
	}
	outcomes := r.runJobs(context.Background(), "me", plan, kinds, jobs)
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

func TestNamespaceEventsAreBounded(t *testing.T) {
	cases := []struct {
		name       string
		namespaces int
		want       []string
	}{
		{"three namespaces: one event each", 3, []string{
			"Normal NamespaceParked parked 2 workloads in namespace ns-00",
			"Normal NamespaceParked parked 2 workloads in namespace ns-01",
			"Normal NamespaceParked parked 2 workloads in namespace ns-02",
		}},
		{"500 namespaces: ten, then one summary", 500, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1000)
			r := &Reconciler{Recorder: rec}
			tallies := map[string]*namespaceTally{}
			for i := range tc.namespaces {
				tallies[fmt.Sprintf("ns-%02d", i)] = &namespaceTally{parked: 2}
			}
			tallies["untouched"] = &namespaceTally{}
			r.emitNamespaceEvents(&scalingv1alpha1.NSScaler{}, tallies)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if tc.want != nil {
				if !slices.Equal(got, tc.want) {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
				return
			}
			if len(got) != maxNamespaceEvents+1 {
				t.Fatalf("%d events, want %d:\n%s", len(got), maxNamespaceEvents+1, strings.Join(got, "\n"))
			}
			wantLast := fmt.Sprintf("Normal NamespaceParked parked %d workloads in %d more namespaces", 2*(tc.namespaces-maxNamespaceEvents), tc.namespaces-maxNamespaceEvents)
			if got[len(got)-1] != wantLast {
				t.Fatalf("summary %q, want %q", got[len(got)-1], wantLast)
			}
		})
	}
}
