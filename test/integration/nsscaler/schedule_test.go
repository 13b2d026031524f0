package nsscaler

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// inUTC returns v with every metav1.Time field in UTC: the apiserver's
// times are decoded in the local zone, the expected ones are written in
// UTC, and Equal compares the zone too.
func inUTC[T scalingv1alpha1.ActiveException | scalingv1alpha1.WakeEntry | scalingv1alpha1.ContestedWorkload](v T) T {
	switch x := any(&v).(type) {
	case *scalingv1alpha1.ActiveException:
		x.Until = metav1.NewTime(x.Until.UTC())
	case *scalingv1alpha1.WakeEntry:
		x.Until = metav1.NewTime(x.Until.UTC())
	case *scalingv1alpha1.ContestedWorkload:
		x.RetryAt = metav1.NewTime(x.RetryAt.UTC())
	}
	return v
}

// expectPhase waits until the NSScaler reports the phase and next
// transition (zero: none) for its current generation.
func expectPhase(g Gomega, name string, phase scalingv1alpha1.Phase, next time.Time) {
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.Phase).To(Equal(phase))
		if next.IsZero() {
			g.Expect(s.Status.NextTransition).To(BeNil())
		} else {
			g.Expect(s.Status.NextTransition).NotTo(BeNil())
			g.Expect(s.Status.NextTransition.Time.Equal(next)).To(BeTrue(), "next transition %s, want %s", s.Status.NextTransition, next)
		}
	}, timeout, poll).Should(Succeed())
}

// TestScheduleParksAndRestoresAtTheTransitions drives a Berlin night
// window with a fake clock: nothing happens before 20:00, everything is
// parked at 20:00 and restored exactly at 08:00, and nothing is written in
// between.
func TestScheduleParksAndRestoresAtTheTransitions(t *testing.T) {
	// Monday 2026-11-30, 19:59 in Berlin (CET, UTC+1).
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-11-30T18:59:00Z"))
	requests := &requestLog{}
	startManager(t, managerOptions{clock: clk, requests: requests})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "sched")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createStatefulSet(t, ns, "db", 2)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Schedule: &scalingv1alpha1.Schedule{
		Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{{Days: "Mon-Fri", From: "20:00", To: "08:00"}}},
	}})
	evening, morning := mustParse(t, "2026-11-30T19:00:00Z"), mustParse(t, "2026-12-01T07:00:00Z")

	expectPhase(g, name, scalingv1alpha1.PhaseAwake, evening)
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	g.Expect(requests.writes("/namespaces/"+ns+"/")).To(BeEmpty(), "nothing written before the window")
	g.Expect(getScaler(g, name).Status.Reason).To(Equal("outside the sleep windows (Europe/Berlin)"))

	clk.SetTime(evening)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhaseAsleep, morning)
	g.Expect(getScaler(g, name).Status.Reason).To(Equal("sleep window Mon-Fri 20:00-08:00 (Europe/Berlin)"))
	parkWrites := len(requests.writes("/namespaces/" + ns + "/"))
	g.Expect(parkWrites).To(Equal(2), "one write per workload: %v", requests.writes("/namespaces/"+ns+"/"))

	// Half the night passes: no transition, no write.
	clk.SetTime(mustParse(t, "2026-12-01T01:00:00Z"))
	g.Consistently(func() []string { return requests.writes("/namespaces/" + ns + "/") }, "1s", poll).Should(HaveLen(parkWrites))

	clk.SetTime(morning)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
		g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhaseAwake, mustParse(t, "2026-12-01T19:00:00Z"))
	g.Expect(requests.writes("/namespaces/"+ns+"/")).To(HaveLen(4), "one restore write per workload")
}

// TestExceptionForcesAPhase: an Asleep exception parks during the day; at
// its end the night window that covers that moment keeps the namespace
// asleep, and the window's end restores it.
func TestExceptionForcesAPhase(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-24T10:00:00Z"))
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "except")
	createDeployment(t, ns, "web", ptr.To[int32](2))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Schedule: &scalingv1alpha1.Schedule{
		Schedule:   weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{{Days: "Mon-Fri", From: "20:00", To: "08:00"}}},
		Exceptions: []scalingv1alpha1.ScheduleException{{Name: "christmas", From: "2026-12-24", Until: "2026-12-25", Phase: scalingv1alpha1.PhaseAsleep}},
	}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ActiveException).NotTo(BeNil())
		g.Expect(inUTC(*s.Status.ActiveException)).To(Equal(scalingv1alpha1.ActiveException{Name: "christmas", Phase: scalingv1alpha1.PhaseAsleep,
			Until: metav1.NewTime(mustParse(t, "2026-12-26T00:00:00Z"))}))
	}, timeout, poll).Should(Succeed())
	// The exception ends at Saturday 00:00, inside Friday's night window
	// (Fri 20:00 – Sat 08:00): the sleep goes on until 08:00.
	expectPhase(g, name, scalingv1alpha1.PhaseAsleep, mustParse(t, "2026-12-26T08:00:00Z"))
	clk.SetTime(mustParse(t, "2026-12-26T00:00:00Z"))
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.ActiveException).To(BeNil())
		g.Expect(s.Status.Reason).To(Equal("sleep window Mon-Fri 20:00-08:00 (UTC)"))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	// Saturday 08:00: no window starts on Saturday, awake until Monday 20:00.
	expectPhase(g, name, scalingv1alpha1.PhaseAsleep, mustParse(t, "2026-12-26T08:00:00Z"))
	clk.SetTime(mustParse(t, "2026-12-26T08:00:00Z"))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhaseAwake, mustParse(t, "2026-12-28T20:00:00Z"))
}

// TestWakeRestoresThenReparksAtItsEnd: a parked namespace is woken until T
// by spec.wake; at T it is parked again with the same recorded original.
func TestWakeRestoresThenReparksAtItsEnd(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p := prefix("wake")
	a, b := p+"a", p+"b"
	name := testenv.RandomName("wake")
	for _, ns := range []string{a, b} {
		createNamespace(t, ns, nil)
		createDeployment(t, ns, "web", ptr.To[int32](3))
	}
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhaseAsleep, time.Time{})

	until := t0.Add(2 * time.Hour)
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) {
		s.Wake = []scalingv1alpha1.WakeEntry{{Namespace: a, Until: metav1.NewTime(until)}}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 3}))
		g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		s := getScaler(g, name)
		g.Expect(s.Status.Woken).To(HaveLen(1))
		g.Expect(inUTC(s.Status.Woken[0])).To(Equal(scalingv1alpha1.WakeEntry{Namespace: a, Until: metav1.NewTime(until)}))
		g.Expect(s.Status.ActiveNamespaces).To(Equal([]string{a}))
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhasePartial, until)

	clk.SetTime(until)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(getScaler(g, name).Status.Woken).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
	expectPhase(g, name, scalingv1alpha1.PhaseAsleep, time.Time{})
}

// TestInvalidTimeZoneIsReported: a zone name the CRD's pattern accepts but
// no time zone database knows is a condition, and nothing is touched.
func TestInvalidTimeZoneIsReported(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "badzone")
	createDeployment(t, ns, "web", ptr.To[int32](2))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Schedule: &scalingv1alpha1.Schedule{
		Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Atlantis", Windows: []weeklyv1alpha1.Window{{Days: "Mon-Sun", From: "00:00", To: "24:00"}}},
	}})
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		st, reason := conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionFalse, scalingv1alpha1.ReasonInvalidSchedule}))
		g.Expect(s.Status.Reason).To(ContainSubstring(`"Europe/Atlantis" is not a known IANA time zone`))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 2}))

	// Fixed: the always-asleep schedule parks it.
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Schedule.TimeZone = "Europe/Lisbon" })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())
}
