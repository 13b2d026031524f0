package nsscaler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// statusAt is the status a reconcile at now would write for spec, with the
// plan selecting the namespace a and the whitelisted ones.
func statusAt(t *testing.T, spec scalingv1alpha1.NSScalerSpec, now time.Time, obs observation) scalingv1alpha1.NSScalerStatus {
	t.Helper()
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 3}, Spec: spec}
	o := newObservation(s, now)
	obs.generation, obs.deleting, obs.suspended, obs.dryRun, obs.now, obs.moment = o.generation, o.deleting, o.suspended, o.dryRun, now, o.moment
	base := Plan{Parked: sets.New("a"), Active: sets.New(spec.Whitelist...), Foreign: sets.New[string](), Protected: sets.New[string]()}
	obs.plan = base.awake(obs.moment.asleep(), obs.moment.wokenSet())
	obs.nextTransition = obs.moment.nextTransition(now, obs.plan)
	return computeStatus(s, &obs, now)
}

func nights() *scalingv1alpha1.Schedule {
	return &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")}}}
}

func TestStatusSaysWhatIsAsleepUntilWhenAndWhy(t *testing.T) {
	monday := mustTime(t, "2026-11-30T21:00:00Z") // 22:00 in Berlin, in the window
	tomorrow8 := mustTime(t, "2026-12-01T07:00:00Z")
	for _, tc := range []struct {
		name   string
		spec   scalingv1alpha1.NSScalerSpec
		now    time.Time
		obs    observation
		phase  scalingv1alpha1.Phase
		reason string
		next   string // "" for none
		ready  string
	}{
		{"no schedule", scalingv1alpha1.NSScalerSpec{}, monday, observation{}, scalingv1alpha1.PhaseAsleep,
			"no schedule: parked while selected", "", scalingv1alpha1.ReasonReconciled},
		{"in the window", scalingv1alpha1.NSScalerSpec{Schedule: nights()}, monday, observation{}, scalingv1alpha1.PhaseAsleep,
			"sleep window Mon-Fri 20:00-08:00 (Europe/Berlin)", "2026-12-01T07:00:00Z", scalingv1alpha1.ReasonReconciled},
		{"outside it", scalingv1alpha1.NSScalerSpec{Schedule: nights()}, tomorrow8, observation{}, scalingv1alpha1.PhaseAwake,
			"outside the sleep windows (Europe/Berlin)", "2026-12-01T19:00:00Z", scalingv1alpha1.ReasonReconciled},
		{"woken", scalingv1alpha1.NSScalerSpec{Schedule: nights(), Wake: []scalingv1alpha1.WakeEntry{wake("a", monday.Add(time.Hour))}}, monday, observation{},
			scalingv1alpha1.PhaseAwake, "sleep window Mon-Fri 20:00-08:00 (Europe/Berlin); a woken by spec.wake", "2026-11-30T22:00:00Z", scalingv1alpha1.ReasonReconciled},
		{"whitelisted", scalingv1alpha1.NSScalerSpec{Schedule: nights(), Whitelist: []string{"b"}}, monday, observation{}, scalingv1alpha1.PhasePartial,
			"sleep window Mon-Fri 20:00-08:00 (Europe/Berlin); b whitelisted", "2026-12-01T07:00:00Z", scalingv1alpha1.ReasonReconciled},
		{"dry run", scalingv1alpha1.NSScalerSpec{Schedule: nights(), Mode: scalingv1alpha1.ModeDryRun}, monday, observation{wouldPark: 4}, scalingv1alpha1.PhaseAsleep,
			"dry run; sleep window Mon-Fri 20:00-08:00 (Europe/Berlin)", "2026-12-01T07:00:00Z", scalingv1alpha1.ReasonDryRun},
		{"suspended", scalingv1alpha1.NSScalerSpec{Schedule: nights(), Suspend: true}, monday, observation{}, scalingv1alpha1.PhaseAsleep,
			"suspended; sleep window Mon-Fri 20:00-08:00 (Europe/Berlin)", "2026-12-01T07:00:00Z", scalingv1alpha1.ReasonSuspended},
		{"invalid zone", scalingv1alpha1.NSScalerSpec{Schedule: &scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Atlantis", Windows: nights().Windows}}}, monday, observation{},
			"", `invalid schedule: schedule.timeZone "Europe/Atlantis" is not a known IANA time zone; nothing is parked or restored until it is fixed`, "", scalingv1alpha1.ReasonInvalidSchedule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusAt(t, tc.spec, tc.now, tc.obs)
			if st.Phase != tc.phase || st.Reason != tc.reason {
				t.Fatalf("phase %q reason %q, want %q %q", st.Phase, st.Reason, tc.phase, tc.reason)
			}
			switch {
			case tc.next == "" && st.NextTransition != nil:
				t.Fatalf("next transition %s, want none", st.NextTransition)
			case tc.next != "" && (st.NextTransition == nil || !st.NextTransition.Time.Equal(mustTime(t, tc.next))):
				t.Fatalf("next transition %v, want %s", st.NextTransition, tc.next)
			}
			if c := meta.FindStatusCondition(st.Conditions, scalingv1alpha1.ConditionReady); c == nil || c.Reason != tc.ready {
				t.Fatalf("Ready %+v, want reason %s", c, tc.ready)
			}
			if (st.DryRun != nil) != (tc.spec.Mode == scalingv1alpha1.ModeDryRun) || (st.DryRun != nil && st.DryRun.WouldPark != 4) {
				t.Fatalf("dryRun %+v", st.DryRun)
			}
		})
	}
}

// Two reconciles between transitions compute the same status, whatever
// the clock reads: nothing time-dependent but the transitions is in it.
func TestStatusIsTheSameBetweenTransitions(t *testing.T) {
	spec := scalingv1alpha1.NSScalerSpec{Schedule: nights(), Wake: []scalingv1alpha1.WakeEntry{wake("a", mustTime(t, "2026-11-30T23:00:00Z"))}}
	first := statusAt(t, spec, mustTime(t, "2026-11-30T21:00:00Z"), observation{})
	second := statusAt(t, spec, mustTime(t, "2026-11-30T22:59:59Z"), observation{})
	first.Conditions, second.Conditions = nil, nil
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("status moved between transitions:\n%+v\n%+v", first, second)
	}
}

func TestContestedStatus(t *testing.T) {
	var contested []contestedWorkload
	for i := range 12 {
		contested = append(contested, contestedWorkload{
			w:       Workload{Kind: kindDeployment, Namespace: "a", Name: fmt.Sprintf("web-%02d", 11-i)},
			manager: "argocd-controller", retryAt: mustTime(t, "2026-11-30T21:05:00.5Z"),
		})
	}
	st := statusAt(t, scalingv1alpha1.NSScalerSpec{}, mustTime(t, "2026-11-30T21:00:00Z"), observation{contested: contested})
	if st.ContestedWorkloads != 12 || len(st.Contested) != maxContestedListed || st.Contested[0].Name != "web-00" {
		t.Fatalf("contested %d, listed %v", st.ContestedWorkloads, st.Contested)
	}
	if !st.Contested[0].RetryAt.Time.Equal(mustTime(t, "2026-11-30T21:05:00Z")) || st.Contested[0].Manager != "argocd-controller" {
		t.Fatalf("listed %+v", st.Contested[0])
	}
	c := meta.FindStatusCondition(st.Conditions, scalingv1alpha1.ConditionContested)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != scalingv1alpha1.ReasonFieldManagerConflict ||
		!strings.Contains(c.Message, `Deployment a/web-00 by "argocd-controller"`) || !strings.Contains(c.Message, "and 9 more") {
		t.Fatalf("Contested %+v", c)
	}
	none := statusAt(t, scalingv1alpha1.NSScalerSpec{}, mustTime(t, "2026-11-30T21:00:00Z"), observation{})
	if c := meta.FindStatusCondition(none.Conditions, scalingv1alpha1.ConditionContested); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Contested without contest: %+v", c)
	}
}

// A condition message naming namespaces stays short however many there are.
func TestProtectedNamespacesMessageIsBounded(t *testing.T) {
	obs := observation{plan: Plan{Parked: sets.New("a"), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string]()}}
	for i := range 500 {
		obs.plan.Protected.Insert(fmt.Sprintf("infra-%03d", i))
	}
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	st := computeStatus(s, observedOn(s, obs), fakeNow)
	c := meta.FindStatusCondition(st.Conditions, scalingv1alpha1.ConditionReady)
	if c == nil || !strings.Contains(c.Message, "and 490 more") || len(c.Message) > 300 {
		t.Fatalf("Ready message (%d bytes): %s", len(c.Message), c.Message)
	}
}
