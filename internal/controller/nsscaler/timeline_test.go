package nsscaler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

func wake(ns string, until time.Time) scalingv1alpha1.WakeEntry {
	return scalingv1alpha1.WakeEntry{Namespace: ns, Until: metav1.NewTime(until)}
}

// Wake entries: a woken namespace runs while its entry is in force; its
// end is a transition only if the schedule says Asleep then.
func TestMomentWakeEntries(t *testing.T) {
	now := mustTime(t, "2026-11-30T21:00:00Z") // Monday, inside the window
	spec := scalingv1alpha1.NSScalerSpec{
		Schedule: &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")}}},
		Wake: []scalingv1alpha1.WakeEntry{
			wake("a", now.Add(time.Hour)),                  // ends while asleep: a transition
			wake("b", now.Add(-time.Minute)),               // expired: ignored
			wake("c", mustTime(t, "2026-12-01T09:00:00Z")), // ends after the window: no transition
		},
	}
	m := momentAt(spec, now)
	if !m.asleep() || m.err != nil {
		t.Fatalf("moment %+v", m)
	}
	plan := Plan{Parked: sets.New("a", "b", "c", "d"), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}
	plan = plan.awake(m.asleep(), m.wokenSet())
	if got := sets.List(plan.Parked); len(got) != 2 || !plan.Parked.Has("b") || !plan.Parked.Has("d") {
		t.Fatalf("parked %v, want b and d", got)
	}
	if !plan.Woken.Has("a") || !plan.Woken.Has("c") || plan.phase() != scalingv1alpha1.PhasePartial {
		t.Fatalf("woken %v, phase %s", sets.List(plan.Woken), plan.phase())
	}
	if next := m.nextTransition(now, plan); !next.Equal(now.Add(time.Hour)) {
		t.Fatalf("next transition %s, want a's wake-up ending", next)
	}
	// Once a's entry has expired, the next transition is the window's end.
	later := now.Add(time.Hour)
	m = momentAt(spec, later)
	plan = Plan{Parked: sets.New("a", "c"), Active: sets.New[string](), Foreign: sets.New[string]()}.awake(m.asleep(), m.wokenSet())
	if !plan.Parked.Has("a") || plan.Parked.Has("c") {
		t.Fatalf("after a's wake-up: parked %v", sets.List(plan.Parked))
	}
	if next := m.nextTransition(later, plan); !next.Equal(mustTime(t, "2026-12-01T08:00:00Z")) {
		t.Fatalf("next transition %s", next)
	}
	if got := m.wakeEntries(); len(got) != 1 || got[0].Namespace != "c" {
		t.Fatalf("wake entries in force %v", got)
	}
}

func TestMomentWithoutScheduleOrWithAnInvalidOne(t *testing.T) {
	now := mustTime(t, "2026-11-30T12:00:00Z")
	m := momentAt(scalingv1alpha1.NSScalerSpec{}, now)
	if !m.asleep() || m.verdict.Reason != noScheduleReason || !m.nextTransition(now, Plan{}).IsZero() {
		t.Fatalf("without a schedule: %+v", m.verdict)
	}
	m = momentAt(scalingv1alpha1.NSScalerSpec{Schedule: &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Atlantis", Windows: []weeklyv1alpha1.Window{win("Mon", "01:00", "02:00")}}}}, now)
	if m.err == nil {
		t.Fatal("an unknown zone is accepted")
	}
	o := &observation{moment: m}
	if o.acts() {
		t.Fatal("an invalid schedule acts")
	}
	o.deleting = true
	if !o.acts() {
		t.Fatal("a departing NSScaler with an invalid schedule does not restore")
	}
}

func TestPlanPhase(t *testing.T) {
	p := Plan{Parked: sets.New("a"), Active: sets.New[string]()}
	if p.phase() != scalingv1alpha1.PhaseAsleep {
		t.Fatal(p.phase())
	}
	if p.awake(false, nil).phase() != scalingv1alpha1.PhaseAwake {
		t.Fatal("awake plan")
	}
	p.Active.Insert("b")
	if p.phase() != scalingv1alpha1.PhasePartial {
		t.Fatal(p.phase())
	}
}

// A wake-up is a timer on the injected clock: stepping a fake clock past it
// queues the NSScaler; replacing or cancelling it does not.
func TestWakeupsFireOnTheInjectedClock(t *testing.T) {
	c := clocktesting.NewFakeClock(fakeNow)
	w := newWakeups(c)
	w.set("a", fakeNow.Add(time.Minute))
	w.set("b", fakeNow.Add(time.Minute))
	w.set("b", time.Time{})
	w.set("c", fakeNow.Add(2*time.Minute))
	c.Step(time.Minute)
	got := <-w.events
	if got.Object.GetName() != "a" {
		t.Fatalf("woke %s", got.Object.GetName())
	}
	select {
	case e := <-w.events:
		t.Fatalf("woke %s too", e.Object.GetName())
	default:
	}
	if !w.pending("c").Equal(fakeNow.Add(2 * time.Minute)) {
		t.Fatal("c's wake-up is gone")
	}
}
