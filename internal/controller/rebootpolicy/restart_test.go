package rebootpolicy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// decideFor decides about one pending fire for every target, named id,
// under storm control only.
func decideFor(targets []targetInfo, id string, trig, now time.Time, minInterval time.Duration) restartDecision {
	work := pendingWork{all: []pendingEntry{{firedAt: trig, changedAt: trig}}}
	return decideRestart(targets, work, map[string]string{"": id}, now, restartRules{minInterval: minInterval})
}

func TestDecideRestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	trig := now.Add(-5 * time.Second)
	dep := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	ready := func(name string) targetInfo {
		return targetInfo{obj: dep(name), kind: autorebootv1alpha1.KindDeployment}
	}
	restarted := func(name string, at time.Time) targetInfo {
		ti := ready(name)
		ti.restartedAt = at
		return ti
	}
	withID := func(ti targetInfo, id string) targetInfo {
		ti.restartID = id
		return ti
	}
	paused := func(ti targetInfo) targetInfo {
		ti.paused = true
		return ti
	}
	createdAt := func(ti targetInfo, at time.Time) targetInfo {
		ti.obj.SetCreationTimestamp(metav1.NewTime(at))
		return ti
	}
	cases := []struct {
		name        string
		targets     []targetInfo
		minInterval time.Duration
		wantRestart int
		wantSkipped int
		wantDone    int
		wantWait    time.Duration
	}{
		{"never restarted: restart now", []targetInfo{ready("a")}, time.Minute, 1, 0, 0, 0},
		{"restarted long ago: restart now", []targetInfo{restarted("a", now.Add(-time.Hour))}, time.Minute, 1, 0, 0, 0},
		{"within cooldown: wait the rest", []targetInfo{restarted("a", now.Add(-40*time.Second))}, time.Minute, 0, 0, 0, 20 * time.Second},
		{"zero cooldown: restart at once", []targetInfo{restarted("a", now.Add(-10*time.Second))}, 0, 1, 0, 0, 0},
		{"rollout in progress: wait", []targetInfo{{obj: dep("a"), kind: autorebootv1alpha1.KindDeployment, progressing: true}}, time.Minute, 0, 0, 0, progressRecheck},
		{"paused: skipped", []targetInfo{{obj: dep("a"), kind: autorebootv1alpha1.KindDeployment, paused: true}}, time.Minute, 0, 1, 0, 0},
		{"OnDelete: skipped", []targetInfo{{obj: dep("a"), kind: autorebootv1alpha1.KindStatefulSet, onDelete: true}}, time.Minute, 0, 1, 0, 0},
		{"already restarted after the trigger: done", []targetInfo{restarted("a", trig.Add(time.Second))}, time.Minute, 0, 0, 1, 0},
		{"one target cooling down holds the others", []targetInfo{ready("a"), restarted("b", now.Add(-30*time.Second))}, time.Minute, 0, 0, 0, 30 * time.Second},
		{"selector: two ready targets restart together", []targetInfo{ready("a"), ready("b")}, time.Minute, 2, 0, 0, 0},
		{"restarted for this trigger in the same second: done", []targetInfo{withID(restarted("a", trig), "rbp/this")}, time.Minute, 0, 0, 1, 0},
		{"restarted for another trigger in the same second: cooldown", []targetInfo{withID(restarted("a", trig), "rbp/other")}, time.Minute, 0, 0, 0, 55 * time.Second},
		{"restarted for this trigger, then paused: done", []targetInfo{paused(withID(restarted("a", trig), "rbp/this"))}, time.Minute, 0, 0, 1, 0},
		{"created after the trigger: done", []targetInfo{createdAt(ready("a"), trig.Add(2*time.Second))}, time.Minute, 0, 0, 1, 0},
		{"created in the trigger's second: restart", []targetInfo{createdAt(ready("a"), trig)}, time.Minute, 1, 0, 0, 0},
		{"selector: one paused, one restarted for this trigger", []targetInfo{paused(ready("a")), withID(restarted("b", trig), "rbp/this")}, time.Minute, 0, 1, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decideFor(tc.targets, "rbp/this", trig, now, tc.minInterval)
			if len(d.restart) != tc.wantRestart || len(d.skipped) != tc.wantSkipped || len(d.done) != tc.wantDone || d.wait != tc.wantWait {
				t.Fatalf("decision = restart %d skipped %d done %d wait %s (%s), want %d %d %d %s",
					len(d.restart), len(d.skipped), len(d.done), d.wait, d.waitReason, tc.wantRestart, tc.wantSkipped, tc.wantDone, tc.wantWait)
			}
		})
	}
}

func TestRestartPatchIsMinimal(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	p := restartPatch(now, "42", "rbp/0123abcd")
	data, err := p.Data(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"resourceVersion":"42","annotations":{"autoreboot.runbook.dev/restart-id":"rbp/0123abcd"}},"spec":{"template":{"metadata":{"annotations":{"autoreboot.runbook.dev/restartedAt":"2026-03-04T05:06:07Z"}}}}}`
	if string(data) != want {
		t.Fatalf("patch = %s, want %s", data, want)
	}
	if p.Type() != "application/merge-patch+json" {
		t.Fatalf("patch type = %s", p.Type())
	}
}

func TestInspectTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := "2026-01-01T00:00:00Z"
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{autorebootv1alpha1.RestartedAtAnnotation: at}}}
	done := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tmpl},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3},
	}
	if ti := inspectTarget(done, now, nil); ti.progressing || ti.paused || ti.restartedAt.Format(time.RFC3339) != at || ti.stampInFuture {
		t.Fatalf("finished deployment: %+v", ti)
	}
	dep := func(change func(d *appsv1.Deployment)) *appsv1.Deployment {
		d := done.DeepCopy()
		change(d)
		return d
	}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 2, UpdatedReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r1"}}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}}
	cases := []struct {
		name        string
		obj         client.Object
		progressing bool
	}{
		{"unobserved generation defers", dep(func(d *appsv1.Deployment) { d.Generation = 3 }), true},
		{"updated replicas short of desired defers", dep(func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 2 }), true},
		{"crash-looping: nothing available is restartable", dep(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }), false},
		{"old pods still terminating is restartable", dep(func(d *appsv1.Deployment) { d.Status.Replicas = 4 }), false},
		{"statefulset rolled out", sts, false},
		{"statefulset with no ready pod is restartable", func() client.Object { s := sts.DeepCopy(); s.Status.ReadyReplicas = 0; return s }(), false},
		{"statefulset with an unupdated pod defers", func() client.Object { s := sts.DeepCopy(); s.Status.UpdatedReplicas = 1; return s }(), true},
		{"daemonset with no available pod is restartable", func() client.Object { d := ds.DeepCopy(); d.Status.NumberAvailable = 0; return d }(), false},
		{"daemonset with an unupdated node defers", func() client.Object { d := ds.DeepCopy(); d.Status.UpdatedNumberScheduled = 2; return d }(), true},
	}
	for _, tc := range cases {
		if got := inspectTarget(tc.obj, now, nil).progressing; got != tc.progressing {
			t.Errorf("%s: progressing = %v, want %v", tc.name, got, tc.progressing)
		}
	}
	if !inspectTarget(dep(func(d *appsv1.Deployment) { d.Spec.Paused = true }), now, nil).paused {
		t.Fatal("paused deployment not seen as paused")
	}
	onDelete := sts.DeepCopy()
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	if !inspectTarget(onDelete, now, nil).onDelete {
		t.Fatal("OnDelete statefulset not seen")
	}
	future := dep(func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] = "2099-01-01T00:00:00Z"
	})
	if ti := inspectTarget(future, now, nil); !ti.stampInFuture || !ti.restartedAt.IsZero() {
		t.Fatalf("a restartedAt in the future is not ignored: %+v", ti)
	}
	skewed := dep(func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] = now.Add(2 * time.Second).Format(time.RFC3339)
	})
	if ti := inspectTarget(skewed, now, nil); ti.stampInFuture {
		t.Fatal("a stamp within the clock skew counts as in the future")
	}
}

func TestFutureRestartStampDoesNotBlockARestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{autorebootv1alpha1.RestartedAtAnnotation: "2099-01-01T00:00:00Z"}}}},
		Status: appsv1.DeploymentStatus{UpdatedReplicas: 1},
	}
	dec := decideFor([]targetInfo{inspectTarget(d, now, nil)}, "rbp/x", now.Add(-time.Second), now, time.Hour)
	if len(dec.restart) != 1 || dec.wait != 0 {
		t.Fatalf("a restartedAt in 2099 held the restart: %+v", dec)
	}
}

func TestSetConditions(t *testing.T) {
	cases := []struct {
		name       string
		in         conditionInput
		policies   []autorebootv1alpha1.PolicyStatus
		wantReady  metav1.ConditionStatus
		wantReason string
	}{
		{"all good", conditionInput{targetsFound: true}, nil, metav1.ConditionTrue, autorebootv1alpha1.ReasonReconciled},
		{"suspended", conditionInput{suspended: true}, nil, metav1.ConditionFalse, autorebootv1alpha1.ReasonSuspended},
		{"target missing", conditionInput{}, nil, metav1.ConditionFalse, autorebootv1alpha1.ReasonTargetNotFound},
		{"paused", conditionInput{targetsFound: true, paused: []string{"nginx"}}, nil, metav1.ConditionFalse, autorebootv1alpha1.ReasonTargetPaused},
		{"OnDelete", conditionInput{targetsFound: true, onDelete: []string{"db"}}, nil, metav1.ConditionFalse, autorebootv1alpha1.ReasonTargetOnDelete},
		{"exec not allowed", conditionInput{targetsFound: true}, []autorebootv1alpha1.PolicyStatus{{Name: "p", LastResult: errR, Reason: autorebootv1alpha1.ReasonExecNotAllowed}}, metav1.ConditionFalse, autorebootv1alpha1.ReasonExecNotAllowed},
		{"secret missing", conditionInput{targetsFound: true}, []autorebootv1alpha1.PolicyStatus{{Name: "p", LastResult: errR, Reason: autorebootv1alpha1.ReasonSecretNotFound}}, metav1.ConditionFalse, autorebootv1alpha1.ReasonSecretNotFound},
		{"cooldown", conditionInput{targetsFound: true, waiting: "cooldown"}, nil, metav1.ConditionTrue, autorebootv1alpha1.ReasonRestartPending},
		{"invalid selector wins over a missing target", conditionInput{invalidSpec: "target.selector: bad"}, nil, metav1.ConditionFalse, autorebootv1alpha1.ReasonInvalidSpec},
		{"error without a reason", conditionInput{targetsFound: true}, []autorebootv1alpha1.PolicyStatus{{Name: "p", LastResult: errR}}, metav1.ConditionFalse, autorebootv1alpha1.ReasonProbeError},
	}
	t0 := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &autorebootv1alpha1.RebootPolicyStatus{Policies: tc.policies}
			setConditions(st, 1, t0, tc.in)
			ready := meta.FindStatusCondition(st.Conditions, autorebootv1alpha1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason {
				t.Fatalf("Ready = %+v, want %s/%s", ready, tc.wantReady, tc.wantReason)
			}
			// The injected clock stamps the transition, not the wall clock.
			if !ready.LastTransitionTime.Time.Equal(t0) {
				t.Fatalf("transition stamped %s, want %s", ready.LastTransitionTime, t0)
			}
			if strings.TrimSpace(ready.Message) == "" {
				t.Fatal("empty condition message")
			}
		})
	}
}

func TestSuspendForgetsBaselineAndPending(t *testing.T) {
	ps := []autorebootv1alpha1.PolicyStatus{{Name: "p", Fingerprint: "abc", TriggerHash: "h", PendingTrigger: true, LastResult: "Changed"}}
	suspendPolicyStatuses(ps)
	if ps[0].Fingerprint != "" || ps[0].PendingTrigger || ps[0].TriggerHash != "" {
		t.Fatalf("suspend kept state: %+v", ps[0])
	}
	if _, pending := pendingSince(ps); pending {
		t.Fatal("pending after suspend")
	}
}

func TestPendingSinceTakesTheEarliest(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	t2 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	since, pending := pendingSince([]autorebootv1alpha1.PolicyStatus{
		{Name: "a", PendingTrigger: true, LastTriggerTime: &t1},
		{Name: "b"},
		{Name: "c", PendingTrigger: true, LastTriggerTime: &t2},
	})
	if !pending || !since.Equal(&t2) {
		t.Fatalf("pendingSince = %v %v", since, pending)
	}
}

func TestFiresWhilePendingMergeWithoutStatusChange(t *testing.T) {
	r := &Reconciler{}
	first := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	rbp := &autorebootv1alpha1.RebootPolicy{Status: autorebootv1alpha1.RebootPolicyStatus{Policies: []autorebootv1alpha1.PolicyStatus{{Name: "p"}}}}
	view := func(seq uint64, at time.Time) map[string]probe.WorkerView {
		return map[string]probe.WorkerView{"p": {Hash: "h", Unacked: true, State: probe.PolicyState{
			LastResult: fail, ConsecutiveFailures: 1, Message: "HTTP 500", TriggerHash: "h", FireSeq: seq, FiredAt: at}}}
	}
	acks := r.mergeWorkerStates(rbp, view(1, first), nil)
	if len(acks) != 1 || !rbp.Status.Policies[0].PendingTrigger || !rbp.Status.Policies[0].LastTriggerTime.Time.Equal(first) {
		t.Fatalf("first fire: %+v %+v", acks, rbp.Status.Policies[0])
	}
	before := *rbp.Status.DeepCopy()
	acks = r.mergeWorkerStates(rbp, view(2, first.Add(time.Second)), nil)
	if len(acks) != 1 || acks[0].seq != 2 {
		t.Fatalf("second fire not acknowledged: %+v", acks)
	}
	if !equality.Semantic.DeepEqual(before, rbp.Status) {
		t.Fatalf("a fire while pending changed status:\n%+v\n%+v", before, rbp.Status)
	}
}

func TestRestartIDNamesThePendingTrigger(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	base := &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "rbp", UID: "u1"},
		Status: autorebootv1alpha1.RebootPolicyStatus{Policies: []autorebootv1alpha1.PolicyStatus{
			{Name: "a", PendingTrigger: true, LastTriggerTime: &at, Fingerprint: "f1"},
			{Name: "b", Fingerprint: "g1"},
		}},
	}
	id := restartID(base)
	if !strings.HasPrefix(id, "rbp/") {
		t.Fatalf("id %q does not name the RebootPolicy", id)
	}
	// What a successor reads back from the apiserver: times in seconds.
	reread := base.DeepCopy()
	sub := metav1.NewTime(at.Add(300 * time.Millisecond))
	reread.Status.Policies[0].LastTriggerTime = &sub
	reread.Status.Conditions = []metav1.Condition{{Type: "Ready"}}
	reread.Status.RestartCount = 7
	reread.Status.Policies[1].Fingerprint = "g2" // not pending: not part of this trigger
	if got := restartID(reread); got != id {
		t.Fatalf("same trigger, different id: %q vs %q", got, id)
	}
	differs := map[string]func(*autorebootv1alpha1.RebootPolicy){
		"another object": func(r *autorebootv1alpha1.RebootPolicy) { r.UID = "u2" },
		"a later change": func(r *autorebootv1alpha1.RebootPolicy) { r.Status.Policies[0].Fingerprint = "f2" },
		"a later trigger": func(r *autorebootv1alpha1.RebootPolicy) {
			later := metav1.NewTime(at.Add(time.Second))
			r.Status.Policies[0].LastTriggerTime = &later
		},
		"another policy too": func(r *autorebootv1alpha1.RebootPolicy) { r.Status.Policies[1].PendingTrigger = true },
		"another policy only": func(r *autorebootv1alpha1.RebootPolicy) {
			r.Status.Policies[0].PendingTrigger, r.Status.Policies[1].PendingTrigger = false, true
		},
	}
	for name, mutate := range differs {
		r := base.DeepCopy()
		mutate(r)
		if restartID(r) == id {
			t.Errorf("%s: same id %q", name, id)
		}
	}
}
