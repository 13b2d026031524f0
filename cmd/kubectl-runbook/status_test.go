package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func cond(t string, s metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}

const (
	yes = metav1.ConditionTrue
	no  = metav1.ConditionFalse
)

func TestRebootPolicyRow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rbp := func(gen, observed int64, suspend bool, conds ...metav1.Condition) *autorebootv1alpha1.RebootPolicy {
		return &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: gen},
			Spec: autorebootv1alpha1.RebootPolicySpec{
				Suspend: suspend,
				Target:  autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "nginx"},
			},
			Status: autorebootv1alpha1.RebootPolicyStatus{ObservedGeneration: observed, Conditions: conds, RestartCount: 2,
				LastRestartTime: &metav1.Time{Time: now.Add(-5 * time.Minute)},
				Policies:        []autorebootv1alpha1.PolicyStatus{{Name: "demo-tbl", LastResult: "Success"}}},
		}
	}
	pending := rbp(1, 1, false, cond("Ready", yes, "Reconciled", "all policies are running", 1), cond("Degraded", no, "AsExpected", "", 1))
	pending.Status.Policies[0].PendingTrigger = true
	for _, tc := range []struct {
		name          string
		p             *autorebootv1alpha1.RebootPolicy
		state         State
		reason, infix string
	}{
		{"healthy", rbp(1, 1, false, cond("Ready", yes, "Reconciled", "all policies are running", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StateHealthy, "Reconciled", "Deployment nginx; demo-tbl: Success; 2 restarts, last 5m ago"},
		{"no status yet", rbp(1, 0, false), StatePending, "NotReconciled", "is the manager running"},
		{"status of an older generation", rbp(3, 2, false, cond("Ready", yes, "Reconciled", "", 2)), StatePending, "NotReconciled", "generation 2, the spec is at 3"},
		{"degraded", rbp(1, 1, false, cond("Ready", no, "QueryFailed", "policy demo-tbl: x", 1), cond("Degraded", yes, "QueryFailed", "policy demo-tbl: Table 'test.demo_tbl' doesn't exist", 1)),
			StateDegraded, "QueryFailed", "doesn't exist"},
		{"restart pending", rbp(1, 1, false, cond("Ready", yes, "RestartPending", "restart pending: cooldown until 12:05", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StatePending, "RestartPending", "cooldown until 12:05"},
		{"a policy fired", pending, StatePending, "RestartPending", "policy demo-tbl fired"},
		{"suspended", rbp(1, 1, true), StateSuspended, "Suspended", "spec.suspend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rebootPolicyRow(tc.p, now)
			if r.State != tc.state || r.Reason != tc.reason || !strings.Contains(r.Details, tc.infix) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", r.State, r.Reason, r.Details, tc.state, tc.reason, tc.infix)
			}
		})
	}
}

func TestMemcachedRow(t *testing.T) {
	mc := func(size int32, conds ...metav1.Condition) *cachev1alpha1.Memcached {
		return &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 1},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size)},
			Status:     cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: size, Servers: []string{"a:11211"}, Conditions: conds},
		}
	}
	for _, tc := range []struct {
		name          string
		m             *cachev1alpha1.Memcached
		state         State
		reason, infix string
	}{
		{"available", mc(3, cond("Available", yes, "AllInstancesAvailable", "3/3", 1), cond("Progressing", no, "RolloutComplete", "", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StateHealthy, "AllInstancesAvailable", "3/3 ready"},
		{"scaling", mc(3, cond("Available", no, "InstancesUnavailable", "1/3", 1), cond("Progressing", yes, "ScalingUp", "1 of 3 instances exist", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StatePending, "ScalingUp", "1 of 3"},
		{"parked", mc(0, cond("Available", no, "Parked", "size is 0: no instance runs", 1), cond("Progressing", no, "Parked", "", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StateParked, "Parked", "size is 0"},
		{"foreign object", mc(1, cond("Available", no, "DeploymentMissing", "", 1), cond("Progressing", no, "Blocked", "", 1), cond("Degraded", yes, "ForeignObject", "Deployment c is not controlled by this Memcached", 1)),
			StateDegraded, "ForeignObject", "not controlled"},
		{"unavailable, not progressing", mc(2, cond("Available", no, "InstancesUnavailable", "0/2 instances available", 1), cond("Progressing", no, "ProgressDeadlineExceeded", "", 1), cond("Degraded", no, "AsExpected", "", 1)),
			StateDegraded, "InstancesUnavailable", "0/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := memcachedRow(tc.m)
			if r.State != tc.state || r.Reason != tc.reason || !strings.Contains(r.Details, tc.infix) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", r.State, r.Reason, r.Details, tc.state, tc.reason, tc.infix)
			}
		})
	}
}

func TestNSScalerRow(t *testing.T) {
	nss := func(conds ...metav1.Condition) *scalingv1alpha1.NSScaler {
		return &scalingv1alpha1.NSScaler{
			ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1},
			Status: scalingv1alpha1.NSScalerStatus{ObservedGeneration: 1, Conditions: conds,
				ParkedNamespaces: []string{"proj-a", "proj-c"}, ActiveNamespaces: []string{"proj-b"}, ParkedWorkloads: 2},
		}
	}
	ready := cond("Ready", yes, "Reconciled", "", 1)
	notDegraded := cond("Degraded", no, "AsExpected", "", 1)
	for _, tc := range []struct {
		name          string
		s             *scalingv1alpha1.NSScaler
		state         State
		reason, infix string
	}{
		{"parked", nss(ready, notDegraded, cond("Parked", yes, "AllPodsGone", "", 1)), StateParked, "AllPodsGone", "parked: proj-a, proj-c (2 workloads); running: proj-b"},
		{"parked to N", func() *scalingv1alpha1.NSScaler {
			s := nss(ready, notDegraded, cond("Parked", yes, "ParkedReplicasRunning", "", 1))
			s.Status.ParkedReplicas, s.Status.AtOrBelowParkedReplicas = 2, 3
			return s
		}(), StateParked, "ParkedReplicasRunning", "parked: proj-a, proj-c (2 workloads at 2 replicas, 3 left at or below); running: proj-b"},
		{"workloads in their grace period", nss(ready, notDegraded, cond("Parked", no, "WorkloadsInGrace",
			"1 workloads in 1 namespaces are younger than gracePeriod; the last is parked at 2026-12-05T01:10:00Z", 1)),
			StatePending, "WorkloadsInGrace", "younger than gracePeriod; the last is parked at 2026-12-05T01:10:00Z"},
		{"pods remaining", nss(ready, notDegraded, cond("Parked", no, "PodsRemaining", "3 pods remain in proj-a", 1)), StatePending, "PodsRemaining", "3 pods remain"},
		{"nothing to park", nss(ready, notDegraded, cond("Parked", no, "NothingParked", "no namespace is parked", 1)), StateHealthy, "NothingParked", "running: proj-b"},
		{"contested namespace", nss(ready, cond("Degraded", yes, "NamespaceConflict", "proj-a is acted on by NSScaler older", 1), cond("Parked", yes, "AllPodsGone", "", 1)),
			StateDegraded, "NamespaceConflict", "older"},
		{"contested workloads", nss(ready, notDegraded, cond("Contested", yes, "FieldManagerConflict", "deployment proj-a/api scaled up by hpa", 1), cond("Parked", yes, "AllPodsGone", "", 1)),
			StateDegraded, "FieldManagerConflict", "scaled up by hpa"},
		{"invalid selector", nss(cond("Ready", no, "InvalidSelector", "bad selector", 1), notDegraded), StateDegraded, "InvalidSelector", "bad selector"},
		{"not reconciled", &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 2}}, StatePending, "NotReconciled", "no status yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := nsscalerRow(tc.s)
			if r.State != tc.state || r.Reason != tc.reason || !strings.Contains(r.Details, tc.infix) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", r.State, r.Reason, r.Details, tc.state, tc.reason, tc.infix)
			}
		})
	}
	if !actsOn(nss(), "proj-b") || actsOn(nss(), "default") {
		t.Error("actsOn: an NSScaler acts on its parked and active namespaces only")
	}
}

func TestRender(t *testing.T) {
	rows := []Row{
		{Kind: "RebootPolicy", Namespace: "default", Name: "p", State: StateDegraded, Reason: "QueryFailed", Details: strings.Repeat("x", 150)},
		{Kind: "NSScaler", Name: "s", State: StateParked, Reason: "AllPodsGone", Details: "parked: proj-a"},
	}
	var b bytes.Buffer
	if err := render(&b, rows, "", true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"KIND", "NAMESPACE", "default", "QueryFailed", strings.Repeat("x", 99) + "…", "NSScaler      -  ", "2 objects: 0 healthy, 0 pending, 1 parked, 1 degraded, 0 suspended"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := render(&b, rows, "wide", false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "NAMESPACE") || !strings.Contains(b.String(), strings.Repeat("x", 150)) {
		t.Errorf("-o wide in one namespace: no namespace column, full details:\n%s", b.String())
	}
	b.Reset()
	if err := render(&b, nil, "json", true); err != nil || !strings.Contains(b.String(), `"items": []`) {
		t.Errorf("json of no rows: %v %s", err, b.String())
	}
}

// TestRenderShowsNoControlCharacters: a message quoting tenant input with a
// terminal escape sequence (here: clear the screen, set the title) is
// printed with the control characters replaced, in the table and -o wide.
func TestRenderShowsNoControlCharacters(t *testing.T) {
	hostile := "query failed \x1b[2J\x1b]0;pwned\x07 near \u009b31m"
	rows := []Row{{Kind: "RebootPolicy", Namespace: "ns", Name: "p", State: StateDegraded, Reason: "QueryFailed", Details: hostile}}
	for _, output := range []string{"", "wide"} {
		var b bytes.Buffer
		if err := render(&b, rows, output, true); err != nil {
			t.Fatal(err)
		}
		for _, r := range b.String() {
			if r == 0x1b || r == 0x07 || r == 0x9b {
				t.Fatalf("-o %q printed control character %U:\n%q", output, r, b.String())
			}
		}
		if !strings.Contains(b.String(), "query failed ?[2J?]0;pwned? near ?31m") {
			t.Errorf("-o %q: %q", output, b.String())
		}
	}
}
