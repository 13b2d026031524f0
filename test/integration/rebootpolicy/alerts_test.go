package rebootpolicy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/alerts"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
)

// alertsLabel marks the RebootPolicies the alerts manager reconciles.
const alertsLabel = "alerts"

// stubPrometheus answers /api/v1/query as Prometheus does, from what the
// test says fires per namespace; mode breaks it on purpose.
type stubPrometheus struct {
	mu      sync.Mutex
	firing  map[string][]string
	mode    string // "", "huge", "down"
	queries map[string]int
}

func (s *stubPrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query().Get("query")
	s.queries[q]++
	switch s.mode {
	case "down":
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	case "huge":
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`+strings.Repeat(`{"metric":{"alertname":"X"},"value":[1,"1"]},`, 40000))
		return
	}
	var rows []string
	for ns, names := range s.firing {
		if alerts.Query(ns) != q {
			continue
		}
		for _, n := range names {
			rows = append(rows, fmt.Sprintf(`{"metric":{"alertname":%q},"value":[1,"1"]}`, n))
		}
	}
	_, _ = fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, strings.Join(rows, ","))
}

func (s *stubPrometheus) set(ns, mode string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.firing[ns], s.mode = names, mode
}

func (s *stubPrometheus) asked(ns string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[alerts.Query(ns)]
}

// alertsManager runs a manager with --prometheus-url at a stub, for the
// RebootPolicies of ns labelled for it.
func alertsManager(t *testing.T, ns string, interval time.Duration) (*stubPrometheus, *prometheus.Registry) {
	t.Helper()
	stub := &stubPrometheus{firing: map[string][]string{}, queries: map[string]int{}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	metrics := rbpcontroller.NewMetrics()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	startSecondManager(t, ns, alertsLabel, rbpcontroller.Options{
		Limits:  rbpcontroller.Limits{MinPeriod: time.Second},
		Clock:   clock.RealClock{},
		Metrics: metrics,
		Alerts:  alerts.Settings{URL: srv.URL, Interval: interval, Timeout: 2 * time.Second, MaxResponseBytes: 256 << 10},
	})
	return stub, reg
}

// blockedGauge reads runbook_rebootpolicy_blocked_by_alerts{reason}.
func blockedGauge(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "runbook_rebootpolicy_blocked_by_alerts" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// alertedTarget is Deployment web (rolled out) and RebootPolicy rbp,
// watching ConfigMap settings, blocked by HighErrorRate and
// KubePodCrashLooping, reconciled by the alerts manager. Its settle delay
// (1s, longer than the tests' intervals) makes each restart ready only
// after the answer used for the previous one is too old to be used again:
// each hold is decided on an answer asked for after the test changed what
// Prometheus says.
func alertedTarget(t *testing.T, ns, name string) {
	t.Helper()
	rbp := newRBP(ns, name, webTarget(), watchPolicy("settings"))
	rbp.Spec.SettleDelay = &metav1.Duration{Duration: time.Second}
	rbp.Labels = map[string]string{externalManagerLabel: alertsLabel}
	rbp.Spec.BlockingAlerts = []autorebootv1alpha1.AlertName{"HighErrorRate", "KubePodCrashLooping"}
	NewWithT(t).Expect(createRBP(t, rbp)).To(Succeed())
}

// TestBlockingAlertsHoldAndReleaseARealRestart: while HighErrorRate fires
// for the namespace the restart waits (Ready BlockedByAlerts naming it
// and not an unrelated alert firing there, status, a Warning event, the
// gauge); when it stops the restart is made once. A Prometheus giving a
// hostile (oversized) answer or HTTP 503 holds the next restart
// (Degraded AlertsUnavailable) until it answers again. Alerts of another
// namespace hold nothing.
func TestBlockingAlertsHoldAndReleaseARealRestart(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "alerts")
	prom, reg := alertsManager(t, ns, 300*time.Millisecond)
	changeConfigMap(t, ns, "settings", "v1")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
	markRolledOut(t, dep)
	alertedTarget(t, ns, "rbp")
	waitBaseline(t, ns, "rbp")
	prom.set(ns, "", "HighErrorRate", "SomethingElse")
	prom.set("other-namespace", "", "KubePodCrashLooping")

	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonBlockedByAlerts))
	rbp := getRBP(t, ns, "rbp")
	msg := condition(rbp, autorebootv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("HighErrorRate"))
	g.Expect(msg).NotTo(ContainSubstring("SomethingElse"))
	g.Expect(rbp.Status.BlockingAlerts).NotTo(BeNil())
	g.Expect(rbp.Status.BlockingAlerts.Firing).To(Equal([]autorebootv1alpha1.AlertName{"HighErrorRate"}))
	g.Expect(rbp.Status.PendingRestarts).To(Equal(int32(1)))
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.ReasonBlockedByAlerts) }, timeout, interval).
		Should(ConsistOf(And(ContainSubstring("Deployment web"), ContainSubstring("HighErrorRate"))))
	g.Expect(blockedGauge(t, reg, autorebootv1alpha1.ReasonBlockedByAlerts)).To(Equal(1.0))
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, interval).Should(BeEmpty())

	prom.set(ns, "", "SomethingElse")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	g.Expect(getRBP(t, ns, "rbp").Status.BlockingAlerts).To(BeNil())
	g.Eventually(func() []string { return eventReasons(ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventAlertsCleared))
	g.Expect(blockedGauge(t, reg, autorebootv1alpha1.ReasonBlockedByAlerts)).To(Equal(0.0))
	first := restartedAt(getDeployment(t, ns, "web"))
	g.Consistently(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, 2*time.Second, interval).Should(Equal(int64(1)))

	for _, mode := range []string{"huge", "down"} {
		markRolledOut(t, getDeployment(t, ns, "web"))
		prom.set(ns, mode)
		changeConfigMap(t, ns, "settings", "v3-"+mode)
		g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionDegraded) }, timeout, interval).
			Should(Equal(autorebootv1alpha1.ReasonAlertsUnavailable), mode)
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
		g.Expect(c.Message).To(ContainSubstring("fail safe"))
		g.Expect(c.Message).To(Or(ContainSubstring("larger than"), ContainSubstring("HTTP 503")))
		g.Expect(blockedGauge(t, reg, autorebootv1alpha1.ReasonAlertsUnavailable)).To(Equal(1.0))
		g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 2*time.Second, interval).Should(Equal(first), mode)
		before := getRBP(t, ns, "rbp").Status.RestartCount
		prom.set(ns, "")
		g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(before+1), mode)
		first = restartedAt(getDeployment(t, ns, "web"))
	}
	g.Expect(reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionDegraded)).To(Equal(autorebootv1alpha1.ReasonAsExpected))
	g.Expect(prom.asked("other-namespace")).To(BeZero(), "a namespace without a waiting policy was queried")
}

// TestManyHeldPoliciesCostOneQueryPerNamespace: 40 RebootPolicies held by
// the same firing alert cost one query per interval for their namespace,
// not one per policy, and all go on when it stops.
func TestManyHeldPoliciesCostOneQueryPerNamespace(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "alerts-many")
	const interval = 500 * time.Millisecond
	prom, reg := alertsManager(t, ns, interval)
	changeConfigMap(t, ns, "settings", "v1")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
	markRolledOut(t, dep)
	const n = 40
	for i := range n {
		alertedTarget(t, ns, fmt.Sprintf("rbp-%02d", i))
	}
	for i := range n {
		waitBaseline(t, ns, fmt.Sprintf("rbp-%02d", i))
	}
	prom.set(ns, "", "KubePodCrashLooping")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() float64 { return blockedGauge(t, reg, autorebootv1alpha1.ReasonBlockedByAlerts) }, timeout, interval).Should(Equal(float64(n)))
	start, asked := time.Now(), prom.asked(ns)
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, 100*time.Millisecond).Should(BeEmpty())
	queries := prom.asked(ns) - asked
	elapsed := time.Since(start)
	t.Logf("%d held policies: %d queries in %s (interval %s)", n, queries, elapsed.Round(time.Millisecond), interval)
	g.Expect(queries).To(BeNumerically("<=", int(elapsed/interval)+2))

	prom.set(ns, "")
	g.Eventually(func() float64 { return blockedGauge(t, reg, autorebootv1alpha1.ReasonBlockedByAlerts) }, timeout, interval).Should(BeZero())
	g.Eventually(func() string { return restartedAt(getDeployment(t, ns, "web")) }, timeout, interval).ShouldNot(BeEmpty())
}

// TestBlockingAlertsWithoutPrometheusHold: the suite's manager has no
// --prometheus-url: a policy with blockingAlerts says so at once
// (Degraded AlertsNotConfigured) and holds its restart.
func TestBlockingAlertsWithoutPrometheusHold(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "alerts-none")
	changeConfigMap(t, ns, "settings", "v1")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
	markRolledOut(t, dep)
	rbp := newRBP(ns, "rbp", webTarget(), watchPolicy("settings"))
	rbp.Spec.BlockingAlerts = []autorebootv1alpha1.AlertName{"HighErrorRate"}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionDegraded) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonAlertsNotConfigured))
	g.Expect(condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded).Message).To(ContainSubstring("--prometheus-url"))
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() []string { return eventReasons(ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.ReasonAlertsNotConfigured))
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, interval).Should(BeEmpty())
	g.Expect(getRBP(t, ns, "rbp").Status.PendingRestarts).To(Equal(int32(1)))
	// Removing blockingAlerts lets it go on.
	updateRBP(t, ns, "rbp", func(r *autorebootv1alpha1.RebootPolicy) { r.Spec.BlockingAlerts = nil })
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
}

// TestBlockingAlertNamesRejectPromQL: a tenant's alert names are checked
// by the apiserver: no label matchers, quotes, regexes or PromQL, at most
// 16, each at most 128 characters, no duplicates.
func TestBlockingAlertNamesRejectPromQL(t *testing.T) {
	ns := createNamespace(t, "alerts-names")
	many := make([]autorebootv1alpha1.AlertName, autorebootv1alpha1.MaxBlockingAlerts+1)
	for i := range many {
		many[i] = autorebootv1alpha1.AlertName(fmt.Sprintf("Alert%d", i))
	}
	for i, tc := range []struct {
		names   []autorebootv1alpha1.AlertName
		message string
	}{
		{[]autorebootv1alpha1.AlertName{`HighErrorRate{namespace="other"}`}, "a blocking alert is a Prometheus alert name"},
		{[]autorebootv1alpha1.AlertName{`HighErrorRate",namespace=~".*`}, "no label matchers, quotes or PromQL"},
		{[]autorebootv1alpha1.AlertName{`up or vector(1)`}, "a blocking alert is a Prometheus alert name"},
		{[]autorebootv1alpha1.AlertName{`.*`}, "a blocking alert is a Prometheus alert name"},
		{[]autorebootv1alpha1.AlertName{`1Alert`}, "a blocking alert is a Prometheus alert name"},
		{[]autorebootv1alpha1.AlertName{"Alert\n"}, "a blocking alert is a Prometheus alert name"},
		{[]autorebootv1alpha1.AlertName{""}, "spec.blockingAlerts[0]"},
		{[]autorebootv1alpha1.AlertName{autorebootv1alpha1.AlertName(strings.Repeat("A", 129))}, "Too long"},
		{[]autorebootv1alpha1.AlertName{"A", "A"}, "Duplicate value"},
		{many, "Too many"},
	} {
		spec := validSpec()
		spec.BlockingAlerts = tc.names
		rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: spec}
		err := k8s.Create(context.Background(), rbp)
		if err == nil {
			_ = k8s.Delete(context.Background(), rbp)
			t.Errorf("%q accepted", tc.names)
			continue
		}
		if !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%q: error %q does not say %q", tc.names, err, tc.message)
		}
	}
	spec := validSpec()
	spec.BlockingAlerts = []autorebootv1alpha1.AlertName{"HighErrorRate", "job:slo_burn:ratio_1h", "_Private"}
	ok := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}, Spec: spec}
	if err := createRBP(t, ok); err != nil {
		t.Fatal(err)
	}
}
