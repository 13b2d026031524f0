package nsscaler

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// selfService allows WakeRequests of at most maxDuration, maxPerDay a day.
func selfService(maxDuration time.Duration, maxPerDay int32) *scalingv1alpha1.SelfService {
	return &scalingv1alpha1.SelfService{Enabled: true, MaxDuration: &metav1.Duration{Duration: maxDuration}, MaxPerDay: maxPerDay}
}

// createWakeRequest creates a request in ns for d (or until, when d is 0).
func createWakeRequest(t *testing.T, ns, name string, d time.Duration, until time.Time) {
	t.Helper()
	if err := k8s.Create(context.Background(), wakeRequest(ns, name, d, until)); err != nil {
		t.Fatal(err)
	}
}

func wakeRequest(ns, name string, d time.Duration, until time.Time) *scalingv1alpha1.WakeRequest {
	wr := &scalingv1alpha1.WakeRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if d > 0 {
		wr.Spec.Duration = &metav1.Duration{Duration: d}
	}
	if !until.IsZero() {
		wr.Spec.Until = ptr.To(metav1.NewTime(until))
	}
	return wr
}

func getWakeRequest(g Gomega, ns, name string) scalingv1alpha1.WakeRequest {
	var wr scalingv1alpha1.WakeRequest
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &wr)).To(Succeed())
	return wr
}

// expectWakeVerdict waits until the request has the phase and the Granted
// condition's reason, and returns it.
func expectWakeVerdict(g Gomega, ns, name string, phase scalingv1alpha1.WakeRequestPhase, reason string) scalingv1alpha1.WakeRequest {
	var wr scalingv1alpha1.WakeRequest
	g.Eventually(func(g Gomega) {
		wr = getWakeRequest(g, ns, name)
		g.Expect(wr.Status.Phase).To(Equal(phase))
		c := findCondition(wr.Status.Conditions, scalingv1alpha1.ConditionGranted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.Status).To(Equal(map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[phase == scalingv1alpha1.WakeRequestGranted]))
	}, timeout, poll).Should(Succeed())
	return wr
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// expectWakeEvent waits for an event of reason about the request.
func expectWakeEvent(g Gomega, ns, name, reason string) {
	g.Eventually(func(g Gomega) {
		var l eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range l.Items {
			found = found || (e.Regarding.Kind == "WakeRequest" && e.Regarding.Name == name && e.Reason == reason)
		}
		g.Expect(found).To(BeTrue(), "no %s event about WakeRequest %s/%s", reason, ns, name)
	}, timeout, poll).Should(Succeed())
}

// wakeWorld is two parked namespaces a and b of a self-service NSScaler,
// each with a Deployment "web" of 3 replicas.
func wakeWorld(t *testing.T, g Gomega, base string, service *scalingv1alpha1.SelfService) (a, b, name string) {
	t.Helper()
	p := prefix(base)
	a, b, name = p+"a", p+"b", testenv.RandomName(base)
	for _, ns := range []string{a, b} {
		createNamespace(t, ns, nil)
		createDeployment(t, ns, "web", ptr.To[int32](3))
	}
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, SelfService: service})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	return a, b, name
}

// TestWakeRequestGrantedThenReparkedAtExpiry: a request in a wakes a (and
// only a) exactly, for its duration; at its end a is parked again and the
// request says Ended/Expired.
func TestWakeRequestGrantedThenReparkedAtExpiry(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	m := startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	a, b, name := wakeWorld(t, g, "wrgrant", selfService(4*time.Hour, 3))

	createWakeRequest(t, a, "late-night", time.Hour, time.Time{})
	wr := expectWakeVerdict(g, a, "late-night", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted)
	g.Expect(wr.Status.NSScaler).To(Equal(name))
	g.Expect(wr.Status.GrantedUntil.Time.Equal(t0.Add(time.Hour))).To(BeTrue(), "grantedUntil %s", wr.Status.GrantedUntil)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 3}))
		s := getScaler(g, name)
		g.Expect(s.Status.TenantWakes).To(HaveLen(1))
		g.Expect(s.Status.TenantWakes[0].Namespace).To(Equal(a))
		g.Expect(s.Status.TenantWakes[0].Request).To(Equal("late-night"))
		g.Expect(s.Status.SelfServiceGrants).To(HaveLen(1))
	}, timeout, poll).Should(Succeed())
	// A request in a never wakes b.
	g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	expectWakeEvent(g, a, "late-night", scalingv1alpha1.EventWakeGranted)
	expectPhase(g, name, scalingv1alpha1.PhasePartial, t0.Add(time.Hour))
	g.Expect(metricValue(m.metrics.WakeRequests().WithLabelValues(scalingv1alpha1.ReasonWakeGranted))).To(BeNumerically(">=", 1))

	clk.SetTime(t0.Add(time.Hour))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(getScaler(g, name).Status.TenantWakes).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
	expectWakeVerdict(g, a, "late-night", scalingv1alpha1.WakeRequestEnded, scalingv1alpha1.ReasonExpired)
	expectWakeEvent(g, a, "late-night", scalingv1alpha1.EventWakeEnded)
}

// TestWakeRequestDeletionEndsTheWake: deleting a granted request parks the
// namespace again at once.
func TestWakeRequestDeletionEndsTheWake(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-02T10:00:00Z"))
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	a, _, name := wakeWorld(t, g, "wrdel", selfService(4*time.Hour, 3))
	createWakeRequest(t, a, "debug", 2*time.Hour, time.Time{})
	expectWakeVerdict(g, a, "debug", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted)
	g.Eventually(func(g Gomega) { g.Expect(deploymentState(g, a, "web").Replicas).To(Equal(int32(3))) }, timeout, poll).Should(Succeed())

	g.Expect(k8s.Delete(context.Background(), wakeRequest(a, "debug", 0, time.Time{}))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(getScaler(g, name).Status.TenantWakes).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}

// TestWakeRequestLimits: an until in year 9999 is clipped to maxDuration;
// a second request while one holds is refused AlreadyWoken; maxPerDay is
// counted on the NSScaler's ledger, so deleting a granted request does not
// give its grant back.
func TestWakeRequestLimits(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	a, b, name := wakeWorld(t, g, "wrlimit", selfService(2*time.Hour, 1))

	createWakeRequest(t, a, "forever", 0, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	wr := expectWakeVerdict(g, a, "forever", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeClipped)
	g.Expect(wr.Status.GrantedUntil.Time.Equal(t0.Add(2*time.Hour))).To(BeTrue(), "grantedUntil %s", wr.Status.GrantedUntil)
	expectPhase(g, name, scalingv1alpha1.PhasePartial, t0.Add(2*time.Hour))

	createWakeRequest(t, a, "second", time.Hour, time.Time{})
	expectWakeVerdict(g, a, "second", scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonAlreadyWoken)
	expectWakeEvent(g, a, "second", scalingv1alpha1.EventWakeRefused)

	g.Expect(k8s.Delete(context.Background(), wakeRequest(a, "forever", 0, time.Time{}))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	clk.Step(time.Minute)
	createWakeRequest(t, a, "third", time.Hour, time.Time{})
	expectWakeVerdict(g, a, "third", scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonOverLimit)
	g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	// b has its own day.
	createWakeRequest(t, b, "other", time.Hour, time.Time{})
	expectWakeVerdict(g, b, "other", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted)

	// A day later a may again.
	clk.SetTime(t0.Add(24*time.Hour + time.Minute))
	createWakeRequest(t, a, "tomorrow", time.Hour, time.Time{})
	expectWakeVerdict(g, a, "tomorrow", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted)
}

// TestWakeRequestRefusals: a namespace no NSScaler selects (NoScaler), a
// protected one (Protected), an NSScaler without selfService
// (SelfServiceDisabled); nothing is woken.
func TestWakeRequestRefusals(t *testing.T) {
	m := startManager(t, managerOptions{})
	g := NewWithT(t)
	p := prefix("wrrefuse")
	lone, guarded, closed := testenv.RandomName("wrlone"), p+"guarded", p+"closed"
	createNamespace(t, lone, nil)
	createNamespace(t, guarded, map[string]string{"scaling.runbook.dev/protected": "true"})
	createNamespace(t, closed, nil)
	createDeployment(t, closed, "web", ptr.To[int32](2))
	name := testenv.RandomName("wrrefuse")
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, closed, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())

	createWakeRequest(t, lone, "r", time.Hour, time.Time{})
	createWakeRequest(t, guarded, "r", time.Hour, time.Time{})
	createWakeRequest(t, closed, "r", time.Hour, time.Time{})
	expectWakeVerdict(g, lone, "r", scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonNoScaler)
	expectWakeVerdict(g, guarded, "r", scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonProtected)
	wr := expectWakeVerdict(g, closed, "r", scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonSelfServiceDisabled)
	g.Expect(wr.Status.NSScaler).To(Equal(name))
	g.Expect(wr.Status.GrantedUntil).To(BeNil())
	expectWakeEvent(g, lone, "r", scalingv1alpha1.EventWakeRefused)
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, closed, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		g.Expect(getScaler(g, name).Status.TenantWakes).To(BeEmpty())
	}, 2*time.Second, poll).Should(Succeed())
	for _, reason := range []string{scalingv1alpha1.ReasonNoScaler, scalingv1alpha1.ReasonProtected, scalingv1alpha1.ReasonSelfServiceDisabled} {
		g.Expect(metricValue(m.metrics.WakeRequests().WithLabelValues(reason))).To(BeNumerically(">=", 1), reason)
	}
}

// TestWakeRequestSurvivesARestart: a manager started in the middle of a
// grant keeps the namespace awake from what the API holds (the request's
// status), writes nothing to it, and parks it at the grant's end.
func TestWakeRequestSurvivesARestart(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	first := startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	a, _, name := wakeWorld(t, g, "wrrestart", selfService(4*time.Hour, 3))
	createWakeRequest(t, a, "r", 90*time.Minute, time.Time{})
	expectWakeVerdict(g, a, "r", scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted)
	g.Eventually(func(g Gomega) { g.Expect(deploymentState(g, a, "web").Replicas).To(Equal(int32(3))) }, timeout, poll).Should(Succeed())
	first.stop(t)

	clk.SetTime(t0.Add(time.Hour))
	requests := &requestLog{}
	startManager(t, managerOptions{clock: clk, requests: requests})
	expectPhase(g, name, scalingv1alpha1.PhasePartial, t0.Add(90*time.Minute))
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 3}))
	}, 2*time.Second, poll).Should(Succeed())
	g.Expect(requests.writes("/deployments/")).To(BeEmpty(), "the new manager wrote to Deployments of a woken namespace")
	g.Expect(requests.writes("/wakerequests/")).To(BeEmpty(), "the new manager decided the granted request again")

	clk.SetTime(t0.Add(90 * time.Minute))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	expectWakeVerdict(g, a, "r", scalingv1alpha1.WakeRequestEnded, scalingv1alpha1.ReasonExpired)
	deleteScalerAndWait(t, name) // while the second manager runs
}

// TestWakeRequestValidation: exactly one of duration and until; the spec
// is immutable.
func TestWakeRequestValidation(t *testing.T) {
	g := NewWithT(t)
	ns := testenv.RandomName("wrvalid")
	createNamespace(t, ns, nil)
	ctx := context.Background()
	both := wakeRequest(ns, "both", time.Hour, time.Now().Add(time.Hour))
	g.Expect(k8s.Create(ctx, both)).To(MatchError(ContainSubstring("set exactly one of duration and until")))
	g.Expect(k8s.Create(ctx, wakeRequest(ns, "none", 0, time.Time{}))).To(MatchError(ContainSubstring("set exactly one of duration and until")))
	neg := wakeRequest(ns, "neg", 0, time.Time{})
	neg.Spec.Duration = &metav1.Duration{Duration: -time.Hour}
	g.Expect(k8s.Create(ctx, neg)).NotTo(Succeed())
	ok := wakeRequest(ns, "ok", time.Hour, time.Time{})
	g.Expect(k8s.Create(ctx, ok)).To(Succeed())
	ok.Spec.Duration = &metav1.Duration{Duration: 100 * time.Hour}
	g.Expect(k8s.Update(ctx, ok)).To(MatchError(ContainSubstring("cannot be changed")))
}

// TestWakeRequestFlood: a thousand requests in one namespace make one
// grant, the rest are refused visibly; requests in a namespace no NSScaler
// selects are refused NoScaler; no goroutine or timer per request stays
// behind, and the NSScaler's status stays small.
func TestWakeRequestFlood(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-02T10:00:00Z"))
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	a, b, name := wakeWorld(t, g, "wrflood", selfService(time.Hour, 3))
	lone := testenv.RandomName("wrfloodlone")
	createNamespace(t, lone, nil)
	settled := goroutines()

	const n, m = 1000, 200
	createMany(t, a, n)
	createMany(t, lone, m)
	count := func(ns string, phase scalingv1alpha1.WakeRequestPhase, reason string) func() int {
		return func() int {
			var l scalingv1alpha1.WakeRequestList
			if err := k8s.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
				return -1
			}
			k := 0
			for _, wr := range l.Items {
				if c := findCondition(wr.Status.Conditions, scalingv1alpha1.ConditionGranted); wr.Status.Phase == phase && c != nil && c.Reason == reason {
					k++
				}
			}
			return k
		}
	}
	long := 5 * time.Minute
	g.Eventually(count(a, scalingv1alpha1.WakeRequestGranted, scalingv1alpha1.ReasonWakeGranted), long, time.Second).Should(Equal(1))
	g.Eventually(count(a, scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonAlreadyWoken), long, time.Second).Should(Equal(n - 1))
	g.Eventually(count(lone, scalingv1alpha1.WakeRequestRefused, scalingv1alpha1.ReasonNoScaler), long, time.Second).Should(Equal(m))
	s := getScaler(g, name)
	g.Expect(s.Status.TenantWakes).To(HaveLen(1))
	g.Expect(s.Status.SelfServiceGrants).To(HaveLen(1))
	g.Expect(s.Status.SelfServiceGrants[0].GrantedAt).To(HaveLen(1))
	g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	// Once everything is decided the manager is back to its goroutines
	// (with slack for client connections and informers settling).
	g.Eventually(goroutines, timeout, poll).Should(BeNumerically("<", settled+40), "goroutines before the flood: %d", settled)
	t.Logf("goroutines: %d before the flood, %d after", settled, goroutines())
}

// createMany creates n requests in ns, 8 at a time.
func createMany(t *testing.T, ns string, n int) {
	t.Helper()
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- k8s.Create(context.Background(), wakeRequest(ns, fmt.Sprintf("r%04d", i), time.Hour, time.Time{}))
		}()
	}
	for range n {
		if err := <-errs; err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func goroutines() int { return runtime.NumGoroutine() }
