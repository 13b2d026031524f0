package rebootpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
	"github.com/runbook-dev/runbook/internal/probe/probetest"
)

// govStart is the fake clock's start (a Thursday, 00:00 UTC).
var govStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDecideGovernance(t *testing.T) {
	now := govStart.Add(12 * time.Hour)
	target := func(name string) targetInfo {
		return targetInfo{obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}}, kind: autorebootv1alpha1.KindDeployment}
	}
	progressing := func(ti targetInfo) targetInfo { ti.progressing = true; return ti }
	change := func(ago time.Duration) pendingEntry {
		return pendingEntry{firedAt: now.Add(-time.Minute), changedAt: now.Add(-ago), settles: true}
	}
	probeFire := pendingEntry{firedAt: now.Add(-time.Second), changedAt: now.Add(-time.Second)}
	closed := mustSchedule(t, "UTC", everyDay("14:00", "15:00"))
	open := mustSchedule(t, "UTC", everyDay("11:00", "13:00"))
	ids := map[string]string{"": "rbp/all"}
	cases := []struct {
		name        string
		targets     []targetInfo
		work        pendingWork
		rules       restartRules
		wantRestart []string
		wantWait    time.Duration
		wantReason  string
		wantWaiting int
	}{
		{"settling: wait the rest of the delay", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{change(2 * time.Second)}},
			restartRules{settle: 5 * time.Second}, nil, 3 * time.Second, autorebootv1alpha1.ReasonSettling, 1},
		{"settled: restart", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{change(5 * time.Second)}},
			restartRules{settle: 5 * time.Second}, []string{"a"}, 0, "", 0},
		{"a probe fire does not settle", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{probeFire}},
			restartRules{settle: time.Hour}, []string{"a"}, 0, "", 0},
		{"a request (no settle) takes a settling change along", []targetInfo{target("a")},
			pendingWork{all: []pendingEntry{change(time.Second), {firedAt: now, changedAt: now}}},
			restartRules{settle: time.Hour}, []string{"a"}, 0, "", 0},
		{"outside the window: wait for its opening", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{probeFire}},
			restartRules{windows: closed}, nil, 2 * time.Hour, autorebootv1alpha1.ReasonOutsideWindow, 1},
		{"inside a window: restart", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{probeFire}},
			restartRules{windows: open}, []string{"a"}, 0, "", 0},
		{"settled but outside the window: the window decides", []targetInfo{target("a")}, pendingWork{all: []pendingEntry{change(time.Hour)}},
			restartRules{settle: time.Minute, windows: closed}, nil, 2 * time.Hour, autorebootv1alpha1.ReasonOutsideWindow, 1},
		{"all together: one rolling out holds the others", []targetInfo{target("a"), progressing(target("b"))},
			pendingWork{all: []pendingEntry{probeFire}}, restartRules{}, nil, progressRecheck, autorebootv1alpha1.ReasonRestartPending, 2},
		{"maxConcurrent: each on its own", []targetInfo{target("a"), progressing(target("b"))},
			pendingWork{all: []pendingEntry{probeFire}}, restartRules{maxConcurrent: 1}, []string{"a"}, progressRecheck, autorebootv1alpha1.ReasonRestartPending, 1},
		{"a referenced change is for its target only", []targetInfo{target("a"), target("b")},
			pendingWork{byTarget: map[string][]pendingEntry{"b": {change(time.Hour)}}}, restartRules{}, []string{"b"}, 0, "", 0},
		{"one target settles while another may restart", []targetInfo{target("a"), target("b")},
			pendingWork{byTarget: map[string][]pendingEntry{"a": {change(time.Second)}, "b": {change(time.Hour)}}},
			restartRules{settle: time.Minute}, []string{"b"}, 59 * time.Second, autorebootv1alpha1.ReasonSettling, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.work.byTarget == nil {
				tc.work.byTarget = map[string][]pendingEntry{}
			}
			d := decideRestart(tc.targets, tc.work, ids, now, tc.rules)
			var got []string
			for _, ti := range d.restart {
				got = append(got, ti.obj.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tc.wantRestart, ",") || d.wait != tc.wantWait || d.condReason != tc.wantReason ||
				d.waiting != tc.wantWaiting {
				t.Fatalf("restart %v wait %s (%s: %s) waiting %d, want %v %s %s %d",
					got, d.wait, d.condReason, d.waitReason, d.waiting, tc.wantRestart, tc.wantWait, tc.wantReason, tc.wantWaiting)
			}
		})
	}
}

// selectorDeployments are n rolled-out Deployments labelled tier=web.
func selectorDeployments(n int) []client.Object {
	out := make([]client.Object, 0, n)
	for i := range n {
		d := rolledOutDeployment(govStart.Add(-time.Hour))
		d.Name = fmt.Sprintf("d%02d", i)
		d.Labels = map[string]string{"tier": "web"}
		out = append(out, d)
	}
	return out
}

func selectorTarget() autorebootv1alpha1.TargetRef {
	return autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "web"}}}
}

func (fx *reconcileFixture) get(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := fx.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// startRollout gives a restarted Deployment the generation the apiserver
// would (the fake client does not count them): its rollout has begun.
func (fx *reconcileFixture) startRollout(t *testing.T, name string) {
	t.Helper()
	d := fx.get(t, name)
	d.Generation++
	if err := fx.c.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// rollOut finishes the rollout of a restarted Deployment, as its
// controller would, and shows the throttle (as its informer would).
func (fx *reconcileFixture) rollOut(t *testing.T, name string) {
	t.Helper()
	d := fx.get(t, name)
	d.Status.ObservedGeneration = d.Generation
	if err := fx.c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	fx.r.Throttle.observe(fx.get(t, name))
}

func restartedNames(t *testing.T, fx *reconcileFixture, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		name := fmt.Sprintf("d%02d", i)
		if fx.get(t, name).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
			out = append(out, name)
		}
	}
	return out
}

func TestMaxConcurrentOneRestartsOneAtATime(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := pendingPolicy(govStart.Add(-time.Second))
	rbp.Spec.Target = selectorTarget()
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1)}
	fx := newReconcileFixture(t, f, append(selectorDeployments(4), rbp)...)
	for i := range 4 {
		fx.reconcile(t)
		fx.reconcile(t) // a second look changes nothing while it rolls out
		if got := restartedNames(t, fx, 4); len(got) != i+1 {
			t.Fatalf("step %d: restarted %v", i, got)
		}
		if st := fx.rbp(t).Status; st.RestartCount != int64(i+1) {
			t.Fatalf("step %d: restartCount %d", i, st.RestartCount)
		}
		fx.rollOut(t, fmt.Sprintf("d%02d", i))
	}
	fx.reconcile(t)
	st := fx.rbp(t).Status
	if pendingFromStatus(fx.rbp(t)).any() || st.RestartCount != 4 || st.PendingRestarts != 0 {
		t.Fatalf("after the sequence: pending=%v restartCount=%d pendingRestarts=%d", pendingFromStatus(fx.rbp(t)).any(), st.RestartCount, st.PendingRestarts)
	}
}

// A leader killed mid-sequence: its successor (a new reconciler and a new
// throttle, rebuilt from the workloads) repeats no restart and keeps the
// limit for the one still rolling out.
func TestSuccessorResumesASequenceWithoutRepeating(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := pendingPolicy(govStart.Add(-time.Second))
	rbp.Spec.Target = selectorTarget()
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1)}
	fx := newReconcileFixture(t, f, append(selectorDeployments(3), rbp)...)
	fx.reconcile(t)
	fx.startRollout(t, "d00")
	fx.rollOut(t, "d00")
	fx.reconcile(t) // d01 restarted, still rolling out
	fx.startRollout(t, "d01")
	stamps := map[string]string{}
	for _, n := range []string{"d00", "d01"} {
		stamps[n] = fx.get(t, n).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	}

	successor := NewThrottle(0, fx.fc)
	for _, n := range []string{"d00", "d01", "d02"} {
		successor.observe(fx.get(t, n)) // the informer's initial list
	}
	fx.r.Throttle = successor
	fx.r.Status = newStatusWriterFor(fx.c)
	fx.reconcile(t)
	if got := restartedNames(t, fx, 3); len(got) != 2 {
		t.Fatalf("the successor restarted %v while d01 rolls out", got)
	}
	fx.rollOut(t, "d01")
	fx.reconcile(t)
	for n, s := range stamps {
		if got := fx.get(t, n).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; got != s {
			t.Fatalf("%s restarted again (%s → %s)", n, s, got)
		}
	}
	if got := restartedNames(t, fx, 3); len(got) != 3 {
		t.Fatalf("restarted %v", got)
	}
	if st := fx.rbp(t).Status; st.RestartCount != 3 {
		t.Fatalf("restartCount %d", st.RestartCount)
	}
}

func TestSettleDelayMergesABurstIntoOneRestart(t *testing.T) {
	f := probetest.NewProbers()
	k := testKeyFor(t)
	fp := func(s string) probe.Observation { return probe.Observation{Result: ok, Fingerprint: k.FormatHex(s)} }
	rbp := probePolicy()
	rbp.Spec.Policies[0].Trigger = autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "cfg", PeriodSeconds: 1}}
	rbp.Spec.SettleDelay = &metav1.Duration{Duration: 10 * time.Second}
	rbp.Spec.MinRestartInterval = &metav1.Duration{}
	f.SetObservations("health", fp("01"))
	fx := newReconcileFixture(t, f, rbp, rolledOutDeployment(govStart.Add(-time.Hour)))
	nn := fx.req.NamespacedName
	fx.reconcile(t)
	probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health") // baseline
	fx.reconcile(t)
	for i, v := range []string{"02", "03", "04"} { // three edits, 3 s apart
		f.SetObservations("health", fp(v))
		probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health")
		res := fx.reconcile(t)
		if res.RequeueAfter != 10*time.Second {
			t.Fatalf("edit %d: requeue after %s, want the full settle delay", i, res.RequeueAfter)
		}
		if fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
			t.Fatalf("restarted during the burst (edit %d)", i)
		}
		if i < 2 {
			probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health")
			probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health")
		}
	}
	st := fx.rbp(t).Status
	if st.NextRestartTime == nil || st.PendingRestarts != 1 || condReason(fx.rbp(t)) != autorebootv1alpha1.ReasonSettling {
		t.Fatalf("settling state not in status: next=%v pending=%d ready=%s", st.NextRestartTime, st.PendingRestarts, condReason(fx.rbp(t)))
	}
	fx.fc.Step(10 * time.Second)
	fx.reconcile(t)
	fx.reconcile(t)
	if st := fx.rbp(t).Status; st.RestartCount != 1 || pendingFromStatus(fx.rbp(t)).any() || st.NextRestartTime != nil {
		t.Fatalf("after settling: restartCount %d pending %v next %v", st.RestartCount, pendingFromStatus(fx.rbp(t)).any(), st.NextRestartTime)
	}
}

func condReason(rbp *autorebootv1alpha1.RebootPolicy) string {
	if c := conditionOf(rbp, autorebootv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func TestFireOutsideTheWindowRestartsAtItsOpening(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := pendingPolicy(govStart.Add(-time.Second))
	// The clock starts on a Thursday at 00:00 UTC; 01:30 in Berlin is
	// 00:30 UTC.
	rbp.Spec.RestartSchedule = &weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{{Days: "Thu", From: "01:30", To: "02:00"}}}
	fx := newReconcileFixture(t, f, rbp, rolledOutDeployment(govStart.Add(-time.Hour)))
	res := fx.reconcile(t)
	if res.RequeueAfter != 30*time.Minute || condReason(fx.rbp(t)) != autorebootv1alpha1.ReasonOutsideWindow {
		t.Fatalf("requeue after %s, Ready %s", res.RequeueAfter, condReason(fx.rbp(t)))
	}
	if next := fx.rbp(t).Status.NextRestartTime; next == nil || !next.Time.Equal(govStart.Add(30*time.Minute)) {
		t.Fatalf("nextRestartTime %v", next)
	}
	fx.fc.Step(29 * time.Minute)
	fx.reconcile(t)
	if fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] != "" {
		t.Fatal("restarted before the window opened")
	}
	fx.fc.Step(time.Minute)
	fx.reconcile(t)
	got, err := time.Parse(time.RFC3339, fx.deployment(t).Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation])
	if err != nil || !got.Equal(govStart.Add(30*time.Minute)) {
		t.Fatalf("restarted at %s (%v), want at the opening", got, err)
	}
}

func TestInvalidTimeZoneIsReported(t *testing.T) {
	f := probetest.NewProbers()
	rbp := probePolicy()
	rbp.Spec.RestartSchedule = &weeklyv1alpha1.Schedule{TimeZone: "Nowhere/Atlantis", Windows: []weeklyv1alpha1.Window{{From: "01:00", To: "02:00"}}}
	fx := newReconcileFixture(t, f, rbp, rolledOutDeployment(govStart.Add(-time.Hour)))
	fx.reconcile(t)
	if c := conditionOf(fx.rbp(t), autorebootv1alpha1.ConditionDegraded); c == nil || c.Reason != autorebootv1alpha1.ReasonInvalidSchedule ||
		!strings.Contains(c.Message, "Nowhere/Atlantis") {
		t.Fatalf("Degraded = %+v", c)
	}
}

func TestReferencedChangeRestartsOnlyItsTarget(t *testing.T) {
	f := probetest.NewProbers()
	k := testKeyFor(t)
	obs := func(a, b string) probe.Observation {
		return probe.Observation{Result: ok, Message: "tracking", Targets: []probe.TargetObservation{{Name: "d00", References: "r", Fingerprint: k.FormatHex(a)}, {Name: "d01", References: "r", Fingerprint: k.FormatHex(b)}}}
	}
	rbp := probePolicy()
	rbp.Spec.Target = selectorTarget()
	rbp.Spec.Policies[0].Trigger = autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 1}}
	rbp.Spec.MinRestartInterval = &metav1.Duration{}
	f.SetObservations("health", obs("01", "02"))
	fx := newReconcileFixture(t, f, append(selectorDeployments(2), rbp)...)
	nn := fx.req.NamespacedName
	fx.reconcile(t)
	probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health")
	fx.reconcile(t)
	if ts := fx.rbp(t).Status.Policies[0].Targets; len(ts) != 2 || ts[0].Fingerprint == "" || ts[0].PendingTrigger {
		t.Fatalf("baselines: %+v", ts)
	}
	f.SetObservations("health", obs("01", "12"))
	probetest.Tick(t, fx.fc, fx.r.Workers, nn, "health")
	before := len(fx.log.get())
	fx.reconcile(t)
	if got := restartedNames(t, fx, 2); len(got) != 1 || got[0] != "d01" {
		t.Fatalf("restarted %v, want d01 only", got)
	}
	if w := fx.log.get()[before:]; len(w) != 3 || w[0] != "status pending" || w[1] != "patch d01" || w[2] != "status idle" {
		t.Fatalf("writes %v: the fire must be persisted before the patch", w)
	}
	for _, ts := range fx.rbp(t).Status.Policies[0].Targets {
		if ts.PendingTrigger {
			t.Fatalf("%s still pending", ts.Name)
		}
	}
	// The restart id on d01 is its own: a successor recognises it.
	if id := fx.get(t, "d01").Annotations[autorebootv1alpha1.RestartIDAnnotation]; !strings.HasPrefix(id, "rbp/") {
		t.Fatalf("restart id %q", id)
	}
}

func TestRestartRequestIsTakenOnceInOneStatusWrite(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := probePolicy()
	rbp.Spec.MinRestartInterval = &metav1.Duration{}
	rbp.Spec.SettleDelay = &metav1.Duration{Duration: time.Hour} // a request does not settle
	fx := newReconcileFixture(t, f, rbp, rolledOutDeployment(govStart.Add(-time.Hour)))
	fx.reconcile(t)
	request := func(nonce string) {
		cur := fx.rbp(t)
		cur.Annotations = map[string]string{autorebootv1alpha1.RestartRequestAnnotation: nonce}
		if err := fx.c.Update(context.Background(), cur); err != nil {
			t.Fatal(err)
		}
	}
	request("n-1")
	before := len(fx.log.get())
	fx.reconcile(t)
	if w := fx.log.get()[before:]; len(w) != 3 || w[0] != "status pending" || w[1] != "patch web" || w[2] != "status idle" {
		t.Fatalf("writes %v", w)
	}
	st := fx.rbp(t).Status
	if st.LastRestartRequest != "n-1" || st.RestartRequestPending || st.RestartCount != 1 {
		t.Fatalf("status %+v", st)
	}
	if !hasEvent(fx, autorebootv1alpha1.EventRestartRequested) {
		t.Fatal("no RestartRequested event")
	}
	// The same nonce again: nothing.
	fx.reconcile(t)
	if st := fx.rbp(t).Status; st.RestartCount != 1 {
		t.Fatalf("a taken request restarted again: %d", st.RestartCount)
	}
	// A new nonce: one more restart.
	fx.fc.Step(time.Second)
	request("n-2")
	fx.reconcile(t)
	if st := fx.rbp(t).Status; st.RestartCount != 2 || st.LastRestartRequest != "n-2" {
		t.Fatalf("second request: %+v", st)
	}
	// An oversized value is refused, never copied into status.
	request(strings.Repeat("x", autorebootv1alpha1.MaxRestartRequestLength+1))
	fx.reconcile(t)
	fx.reconcile(t)
	if st := fx.rbp(t).Status; st.RestartCount != 2 || st.LastRestartRequest != "n-2" {
		t.Fatalf("an oversized request was taken: %+v", st)
	}
	if n := countEvents(fx, autorebootv1alpha1.EventRestartRequestInvalid); n != 1 {
		t.Fatalf("%d RestartRequestInvalid events, want 1", n)
	}
}

// A request respects the windows: taken at once, acted on at the opening.
func TestRestartRequestWaitsForTheWindow(t *testing.T) {
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := probePolicy()
	rbp.Annotations = map[string]string{autorebootv1alpha1.RestartRequestAnnotation: "n-1"}
	rbp.Spec.RestartSchedule = &weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{everyDay("01:00", "02:00")}}
	fx := newReconcileFixture(t, f, rbp, rolledOutDeployment(govStart.Add(-time.Hour)))
	if res := fx.reconcile(t); res.RequeueAfter != time.Hour {
		t.Fatalf("requeue after %s", res.RequeueAfter)
	}
	if st := fx.rbp(t).Status; st.LastRestartRequest != "n-1" || !st.RestartRequestPending || st.RestartCount != 0 {
		t.Fatalf("status %+v", st)
	}
	fx.fc.Step(time.Hour)
	fx.reconcile(t)
	if st := fx.rbp(t).Status; st.RestartRequestPending || st.RestartCount != 1 {
		t.Fatalf("at the opening: %+v", st)
	}
}

func drainEvents(fx *reconcileFixture) []string {
	rec := fx.r.Events.Recorder.(*events.FakeRecorder)
	for {
		select {
		case e := <-rec.Events:
			fx.seen = append(fx.seen, e)
		default:
			return fx.seen
		}
	}
}

func hasEvent(fx *reconcileFixture, reason string) bool { return countEvents(fx, reason) > 0 }

func countEvents(fx *reconcileFixture, reason string) int {
	n := 0
	for _, e := range drainEvents(fx) {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}
