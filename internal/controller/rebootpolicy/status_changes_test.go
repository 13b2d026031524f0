package rebootpolicy

import (
	"strings"
	"testing"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

func TestFiresKeepWhatChangedUntilTheRestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ps := &autorebootv1alpha1.PolicyStatus{Name: "cfg", LastChange: "ConfigMap old: key x changed"}
	mergeFire(ps, now, true, "ConfigMap app: key a changed")
	if ps.LastChange != "ConfigMap app: key a changed" {
		t.Fatalf("a new pending fire kept the last one's change: %q", ps.LastChange)
	}
	// A second fire merges into the pending restart; a repeat adds nothing.
	mergeFire(ps, now, true, "Secret creds: key b changed")
	mergeFire(ps, now, true, "Secret creds: key b changed")
	if ps.LastChange != "ConfigMap app: key a changed; Secret creds: key b changed" {
		t.Fatalf("%q", ps.LastChange)
	}

	st := &autorebootv1alpha1.RebootPolicyStatus{Policies: []autorebootv1alpha1.PolicyStatus{*ps, {Name: "health", PendingTrigger: true},
		{Name: "refs", Targets: []autorebootv1alpha1.ReferencedTargetStatus{
			{Name: "web", PendingTrigger: true, LastChange: "ConfigMap app-config: key db.url changed"},
			{Name: "api", PendingTrigger: true, LastChange: "Secret other deleted"}}}}}
	if got := pendingSources(st, "web"); got != "policies: cfg (ConfigMap app: key a changed; Secret creds: key b changed),health,refs (ConfigMap app-config: key db.url changed)" {
		t.Fatalf("%q", got)
	}

	targets := mergeTargets(nil, map[string]probe.TargetState{"web": {Fingerprint: "f", FireSeq: 2, FiredAt: now, Change: "ConfigMap a: key x changed"},
		"api": {Fingerprint: "g", FireSeq: 1, FiredAt: now, Change: "ConfigMap b deleted"}}, 1)
	if targets[0].Name != "api" || targets[0].LastChange != "" || targets[1].LastChange != "ConfigMap a: key x changed" {
		t.Fatalf("an acked fire or a fired target: %+v", targets)
	}
}

func TestTriggeredEventNamesWhatChanged(t *testing.T) {
	old := &autorebootv1alpha1.RebootPolicy{}
	old.Status.Policies = []autorebootv1alpha1.PolicyStatus{{Name: "refs"}, {Name: "cfg"}}
	cur := old.DeepCopy()
	cur.Spec.Target.Kind = autorebootv1alpha1.KindDeployment
	cur.Status.Policies[0].Targets = []autorebootv1alpha1.ReferencedTargetStatus{
		{Name: "a", PendingTrigger: true, LastChange: "ConfigMap app: key x changed"},
		{Name: "b", PendingTrigger: true, LastChange: "ConfigMap app: key x changed"},
		{Name: "c", PendingTrigger: true, LastChange: "Secret creds deleted"}}
	cur.Status.Policies[1].PendingTrigger = true
	cur.Status.Policies[1].Message = "unchanged"
	cur.Status.Policies[1].LastChange = "Secret s: key k changed"
	var notes []string
	for _, n := range policyNotes(old, cur) {
		notes = append(notes, n.note)
	}
	want := []string{
		"policy refs fired: Deployment a, b: ConfigMap app: key x changed; Deployment c: Secret creds deleted",
		"policy cfg fired: Secret s: key k changed",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notes\n%s\nwant\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
}

// Two changes before the restart: status does not repeat the first when
// the worker's merged description comes (the worker side is
// TestWatchFiresThatWaitAreNamedOnce in internal/probe).
func TestWatchFiresThatWaitAreNamedOnceInStatus(t *testing.T) {
	now := time.Now()
	ps := &autorebootv1alpha1.PolicyStatus{Name: "cfg"}
	mergeFire(ps, now, true, "ConfigMap app: key a changed")
	mergeFire(ps, now, true, "ConfigMap app: key a changed; ConfigMap app: key b changed")
	if ps.LastChange != "ConfigMap app: key a changed; ConfigMap app: key b changed" {
		t.Fatalf("status: %q", ps.LastChange)
	}
}
