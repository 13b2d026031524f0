package nsscaler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestExcludedBy(t *testing.T) {
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"keep": "running"}})
	if err != nil {
		t.Fatal(err)
	}
	soon := fakeNow.Add(time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name     string
		w        Workload
		excluded bool
		until    string
		err      string
	}{
		{"nothing", Workload{}, false, "", ""},
		{"exclude true", Workload{Exclude: "true"}, true, "", ""},
		{"exclude false", Workload{Exclude: "false"}, false, "", ""},
		{"exclude malformed", Workload{Exclude: "yes"}, false, "", `must be "true" or "false"`},
		{"until in an hour", Workload{ExcludeUntil: soon}, true, soon, ""},
		{"until passed", Workload{ExcludeUntil: fakeNow.Add(-time.Second).Format(time.RFC3339)}, false, "", ""},
		{"until malformed", Workload{ExcludeUntil: "tomorrow"}, false, "", "not an RFC 3339 time"},
		{"until too far ahead", Workload{ExcludeUntil: fakeNow.Add(40 * 24 * time.Hour).Format(time.RFC3339)}, false, "", "more than"},
		{"selector", Workload{Labels: map[string]string{"keep": "running"}}, true, "", ""},
		{"selector, other labels", Workload{Labels: map[string]string{"keep": "no"}}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := excludedBy(tc.w, sel, fakeNow)
			if ex.excluded != tc.excluded {
				t.Fatalf("excluded %v, want %v (%v)", ex.excluded, tc.excluded, ex.err)
			}
			if tc.until != "" && ex.until.Format(time.RFC3339) != tc.until {
				t.Fatalf("until %s, want %s", ex.until, tc.until)
			}
			if (tc.err == "") != (ex.err == nil) || (ex.err != nil && !strings.Contains(ex.err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", ex.err, tc.err)
			}
		})
	}
}

// Excluded, autoscaled and ScaledObject workloads in Decide.
func TestDecideExclusionsAndKEDA(t *testing.T) {
	plan := Plan{Parked: sets.New("ns"), Active: sets.New[string](), Foreign: sets.New[string]()}
	kinds := sets.New(kindDeployment)
	parked := ReplicasOriginal(3, "me").Encode()
	for _, tc := range []struct {
		name   string
		w      Workload
		action Action
		target bool
	}{
		{"excluded, running: left", Workload{Kind: kindDeployment, Namespace: "ns", Replicas: 3, Excluded: true}, ActionNone, false},
		{"excluded, parked: restored", Workload{Kind: kindDeployment, Namespace: "ns", Annotation: parked, HasAnnotation: true, Excluded: true}, ActionRestore, false},
		{"autoscaled: left to its ScaledObject", Workload{Kind: kindDeployment, Namespace: "ns", Replicas: 3, Autoscaled: true}, ActionNone, false},
		{"ScaledObject of a Deployment: paused", Workload{Kind: kindScaledObject, Namespace: "ns", Target: kindDeployment, TargetName: "web"}, ActionPark, true},
		{"ScaledObject paused at 0 by us", Workload{Kind: kindScaledObject, Namespace: "ns", Target: kindDeployment, PausedReplicas: strPtr("0"),
			Annotation: PauseOriginal(nil, "me").Encode(), HasAnnotation: true}, ActionNone, true},
		{"ScaledObject of an unlisted kind", Workload{Kind: kindScaledObject, Namespace: "ns", Target: kindStatefulSet}, ActionNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.w, plan, kinds, "me")
			if err != nil || d.Action != tc.action || d.Target != tc.target {
				t.Fatalf("decision %+v, %v; want %s, target %v", d, err, tc.action, tc.target)
			}
		})
	}
	// A pause original on a Deployment does not fit: left alone.
	if _, err := Decide(Workload{Kind: kindDeployment, Namespace: "ns", Annotation: PauseOriginal(nil, "me").Encode(), HasAnnotation: true}, plan, kinds, "me"); err == nil {
		t.Fatal("a pause original on a Deployment is accepted")
	}
}

func strPtr(s string) *string { return &s }

func TestTargetKind(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		want             KindKey
	}{
		{"", "", kindDeployment},
		{"apps/v1", "Deployment", kindDeployment},
		{"apps/v1", "StatefulSet", kindStatefulSet},
		{"argoproj.io/v1alpha1", "Rollout", KindKey{Group: "argoproj.io", Kind: "Rollout"}},
		{"v1", "ReplicationController", KindKey{Kind: "ReplicationController"}},
	} {
		if got := targetKind(tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("targetKind(%q, %q) = %v, want %v", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

func TestManagerOf(t *testing.T) {
	t1, t2 := metav1.NewTime(fakeNow), metav1.NewTime(fakeNow.Add(time.Minute))
	fields := metav1.NewFieldsV1
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "runbook-nsscaler", Time: &t2, FieldsV1: fields(`{"f:spec":{"f:replicas":{}}}`)},
		{Manager: "argocd-controller", Time: &t1, FieldsV1: fields(`{"f:spec":{"f:replicas":{}}}`)},
		{Manager: "kubectl-edit", Time: &t2, FieldsV1: fields(`{"f:metadata":{"f:labels":{}}}`)},
	}
	if got := managerOf(entries, parkedField(kindDeployment), "runbook-nsscaler"); got != "argocd-controller" {
		t.Fatalf("manager %q, want the owner of spec.replicas", got)
	}
	if got := managerOf(entries, parkedField(kindScaledObject), "runbook-nsscaler"); got != "kubectl-edit" {
		t.Fatalf("manager %q, want the latest other writer when nobody owns the field", got)
	}
	if got := managerOf(entries[:1], parkedField(kindDeployment), "runbook-nsscaler"); got != unknownManager {
		t.Fatalf("manager %q", got)
	}
}

// The exclusion annotations are written by namespace tenants: hostile
// values are bounded and reported, never acted on, never echoed, and never
// make the controller reconcile more than once a minute.
func TestHostileExclusionAnnotations(t *testing.T) {
	farFuture := "9999-12-31T23:59:59Z"
	for _, tc := range []struct {
		name      string
		w         Workload
		validFrom bool
	}{
		{"huge exclude (cut by the cache)", Workload{Exclude: strings.Repeat("t", maxExclusionValue+1)}, false},
		{"huge exclude-until (cut by the cache)", Workload{ExcludeUntil: strings.Repeat("2", maxExclusionValue+1)}, false},
		{"a time with a zone name", Workload{ExcludeUntil: "2026-12-01 10:00:00 CET"}, false},
		{"a date only", Workload{ExcludeUntil: "2026-12-01"}, false},
		{"a unix timestamp", Workload{ExcludeUntil: "1767225600"}, false},
		{"far future", Workload{ExcludeUntil: farFuture}, true},
		{"32 days ahead", Workload{ExcludeUntil: fakeNow.Add(32 * 24 * time.Hour).Format(time.RFC3339)}, true},
		{"exclude TRUE", Workload{Exclude: "TRUE"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := excludedBy(tc.w, nil, fakeNow)
			if ex.excluded || ex.err == nil {
				t.Fatalf("excluded %v err %v: a hostile value must be reported and ignored", ex.excluded, ex.err)
			}
			msg := ex.err.Error()
			if len(msg) > 160 || (tc.w.Exclude != "" && strings.Contains(msg, tc.w.Exclude)) || (tc.w.ExcludeUntil != "" && strings.Contains(msg, tc.w.ExcludeUntil)) {
				t.Fatalf("the message echoes the value or is long (%d bytes): %s", len(msg), msg)
			}
			if !ex.validFrom.IsZero() != tc.validFrom {
				t.Fatalf("validFrom %v", ex.validFrom)
			}
		})
	}
}

// A thousand workloads excluded until a thousand different instants within
// one minute cause one reconcile, at the minute's end.
func TestTenantWakeupsAreRoundedToTheMinute(t *testing.T) {
	p := testPass()
	start := fakeNow.Truncate(time.Minute).Add(time.Minute)
	for i := range 1000 {
		w := Workload{Kind: kindDeployment, Namespace: "ns", Name: fmt.Sprint(i),
			ExcludeUntil: start.Add(time.Duration(i) * 59 * time.Millisecond).Add(time.Second).Format(time.RFC3339Nano)}
		if p.exclude(&w); !w.Excluded {
			t.Fatalf("workload %d not excluded", i)
		}
	}
	if want := start.Add(time.Minute); !p.obs.wakeup.Equal(want) {
		t.Fatalf("wake-up at %s, want %s", p.obs.wakeup, want)
	}
	if got := tenantWakeup(start); !got.Equal(start) {
		t.Fatalf("a whole minute moved to %s", got)
	}
	// An exclude-until too far ahead is reconsidered when it comes within
	// the bound, not before.
	p = testPass()
	until := fakeNow.Add(maxExcludeAhead + time.Hour)
	p.exclude(&Workload{Kind: kindDeployment, Namespace: "ns", ExcludeUntil: until.Format(time.RFC3339)})
	if want := tenantWakeup(until.Add(-maxExcludeAhead)); !p.obs.wakeup.Equal(want) {
		t.Fatalf("wake-up at %s, want %s", p.obs.wakeup, want)
	}
}
