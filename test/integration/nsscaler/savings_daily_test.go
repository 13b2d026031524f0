package nsscaler

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

func expectDaily(g Gomega, got []scalingv1alpha1.DailySavings, want ...scalingv1alpha1.DailySavings) {
	g.Expect(got).To(HaveLen(len(want)), "days %+v", got)
	for i := range want {
		g.Expect(got[i].Day).To(Equal(want[i].Day))
		w := want[i]
		expectSavings(g, got[i].SavingsTotals, w.PodHours.String(), w.CPUCoreHours.String(), w.MemoryGiBHours.String())
	}
}

func dayOf(name, pods, cpu, mem string) scalingv1alpha1.DailySavings {
	return scalingv1alpha1.DailySavings{Day: name, SavingsTotals: scalingv1alpha1.SavingsTotals{
		PodHours: resource.MustParse(pods), CPUCoreHours: resource.MustParse(cpu), MemoryGiBHours: resource.MustParse(mem)}}
}

// TestSavingsDailyAcrossMidnightAndARestart parks 3 replicas requesting
// 250m and 128Mi at 20:00 UTC, replaces the manager at 23:00, restores at
// 02:00 UTC the next day: the restore's write puts exactly 4 hours in the
// first day and 2 in the second (12 + 6 pod-hours), for the namespace and
// the NSScaler, and the second manager wrote no status before it.
func TestSavingsDailyAcrossMidnightAndARestart(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T20:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	first := startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "daily")
	createRequestingDeployment(t, ns, "web", 3, "250m", "128Mi")
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name).Status.Savings
		g.Expect(s).NotTo(BeNil())
		g.Expect(s.CurrentRate.Pods).To(Equal(int64(3)))
		g.Expect(s.DailyFrom).NotTo(BeNil())
		g.Expect(s.DailyFrom.Time.Equal(t0)).To(BeTrue(), "daily from %s", s.DailyFrom)
		g.Expect(s.NamespaceDailyFrom.Time.Equal(t0)).To(BeTrue())
		g.Expect(s.Daily).To(BeEmpty())
	}, timeout, poll).Should(Succeed())

	clk.SetTime(t0.Add(3 * time.Hour))
	first.stop(t)
	requests := &requestLog{}
	second := startManager(t, managerOptions{clock: clk, requests: requests})
	g.Eventually(func() float64 { return savedCounter(second.metrics, "pod_hours", name, ns) }, timeout, poll).Should(Equal(9.0))
	// Past midnight, still parked: no write (the days of the open
	// interval are the reader's).
	clk.SetTime(t0.Add(5 * time.Hour))
	g.Expect(requests.writes("/nsscalers/" + name)).To(BeEmpty())
	s := getScaler(g, name).Status.Savings
	expectSavings(g, savings.NamespaceSince(s.Namespaces[0], mustParse(t, "2026-12-03T00:00:00Z"), clk.Now()), "3", "0.75", "0.375")

	clk.SetTime(t0.Add(6 * time.Hour))
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	want := []scalingv1alpha1.DailySavings{dayOf("2026-12-02", "12", "3", "1.5"), dayOf("2026-12-03", "6", "1.5", "0.75")}
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name).Status.Savings
		g.Expect(s.CurrentRate.Pods).To(BeZero())
		expectSavings(g, s.SavingsTotals, "18", "4.5", "2.25")
		expectDaily(g, s.Daily, want...)
		g.Expect(s.Namespaces).To(HaveLen(1))
		expectDaily(g, s.Namespaces[0].Daily, want...)
	}, timeout, poll).Should(Succeed())
	g.Expect(requests.writes("/nsscalers/"+name, "/status")).NotTo(BeEmpty())

	// Parked again at 03:00 for two hours: the second day grows, the first
	// stays; what a reader sums from 2026-12-03 is 6 + 6 pod-hours.
	clk.SetTime(t0.Add(7 * time.Hour))
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = nil })
	g.Eventually(func(g Gomega) {
		g.Expect(getScaler(g, name).Status.Savings.CurrentRate.Pods).To(Equal(int64(3)))
	}, timeout, poll).Should(Succeed())
	clk.SetTime(t0.Add(9 * time.Hour))
	s = getScaler(g, name).Status.Savings
	from, beyond := savings.WindowStart(mustParse(t, "2026-12-03T04:00:00Z"), s.NamespaceDailyFrom, clk.Now())
	g.Expect(beyond).To(BeFalse())
	expectSavings(g, savings.NamespaceSince(s.Namespaces[0], from, clk.Now()), "12", "3", "1.5")
	expectSavings(g, savings.TotalSince(s, from, clk.Now()), "12", "3", "1.5")
	deleteScalerAndWait(t, name)
}
