package nsscaler

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// The window of TestScheduleOnTheRealClock: it opens this long after the
// test starts and stays open this long.
const (
	windowOpensIn = 20 * time.Second
	windowLasts   = 45 * time.Second
)

// TestScheduleOnTheRealClock: a sleep window computed from the real time
// — opening 20 s after the test starts, in a zone with a half-hour offset
// (Asia/Kolkata), so the wall-clock conversion is really exercised — parks
// the proj-* namespaces when it opens (pods gone) and restores them with
// their exact counts when it closes (pods Running again). No fake clock:
// the real manager binary's timers do it, without any resync.
func TestScheduleOnTheRealClock(t *testing.T) {
	g := NewWithT(t)
	defer func() { manager.DumpLogsOnFailure(t.Failed()) }()
	prefix := testenv.RandomName("proj") + "-"
	projects := []string{prefix + "a", prefix + "b"}
	for _, ns := range projects {
		createProject(g, ns)
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		})
	}
	g.Eventually(func(g Gomega) {
		for _, ns := range projects {
			expectRunning(g, ns)
		}
	}, timeout, poll).Should(Succeed())

	name, opens, closes := createNearWindow(t, g, prefix)

	// Before the window: awake, and the status says until when.
	g.Eventually(func(g Gomega) {
		s := get(g, name)
		g.Expect(s.Status.Phase).To(Equal(scalingv1alpha1.PhaseAwake))
		g.Expect(s.Status.NextTransition).NotTo(BeNil())
		g.Expect(s.Status.NextTransition.Time.Equal(opens)).To(BeTrue(), "next transition %s, want %s", s.Status.NextTransition, opens)
	}, timeout, poll).Should(Succeed())
	for _, ns := range projects {
		expectRunning(g, ns)
	}

	g.Eventually(func(g Gomega) {
		for _, ns := range projects {
			expectParked(g, name, ns)
		}
		s := get(g, name)
		g.Expect(s.Status.Phase).To(Equal(scalingv1alpha1.PhaseAsleep))
		g.Expect(s.Status.Done).To(BeTrue())
		g.Expect(s.Status.NextTransition.Time.Equal(closes)).To(BeTrue(), "next transition %s, want %s", s.Status.NextTransition, closes)
	}, windowOpensIn+timeout, poll).Should(Succeed())
	parkedAt := parkedSince(g, name)
	t.Logf("parked, pods gone: Parked=True since %s (window opened %s)", parkedAt.Format(time.RFC3339), opens.Format(time.RFC3339))
	g.Expect(parkedAt.Before(opens)).To(BeFalse(), "parked before the window opened")

	g.Eventually(func(g Gomega) {
		for _, ns := range projects {
			expectRunning(g, ns)
		}
		s := get(g, name)
		g.Expect(s.Status.Phase).To(Equal(scalingv1alpha1.PhaseAwake))
		g.Expect(s.Status.ParkedNamespaces).To(BeEmpty())
	}, windowLasts+timeout, poll).Should(Succeed())
	g.Expect(time.Now().Before(closes)).To(BeFalse(), "restored before the window closed")
	t.Logf("restored with exact counts, pods Running, %s after the window closed", time.Since(closes).Round(time.Millisecond))
}

// createNearWindow creates an NSScaler of the prefix whose sleep window,
// read in Asia/Kolkata, opens windowOpensIn from now and lasts windowLasts.
func createNearWindow(t *testing.T, g *WithT, prefix string) (name string, opens, closes time.Time) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	g.Expect(err).NotTo(HaveOccurred())
	opens = time.Now().Add(windowOpensIn).Truncate(time.Second)
	closes = opens.Add(windowLasts)
	name = testenv.RandomName("nightly")
	w := weeklyv1alpha1.Window{
		Days: opens.In(kolkata).Format("Mon"), From: opens.In(kolkata).Format("15:04:05"), To: closes.In(kolkata).Format("15:04:05"),
	}
	scaler := &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: scalingv1alpha1.NSScalerSpec{NamespacePrefix: prefix, Schedule: &scalingv1alpha1.Schedule{
			Schedule: weeklyv1alpha1.Schedule{TimeZone: "Asia/Kolkata", Windows: []weeklyv1alpha1.Window{w}},
		}},
	}
	g.Expect(k8s.Create(context.Background(), scaler)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), scaler) })
	t.Logf("window %s–%s (Asia/Kolkata) on %s", w.From, w.To, w.Days)
	return name, opens, closes
}

func get(g Gomega, name string) scalingv1alpha1.NSScaler {
	var s scalingv1alpha1.NSScaler
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s)).To(Succeed())
	return s
}

// parkedSince is when the NSScaler's Parked condition last became True.
func parkedSince(g Gomega, name string) time.Time {
	c := meta.FindStatusCondition(get(g, name).Status.Conditions, scalingv1alpha1.ConditionParked)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	return c.LastTransitionTime.Time
}
