package rebootpolicy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// gateMetrics are the collectors of the health gate and approvals.
type gateMetrics struct {
	halted    prometheus.Gauge
	awaiting  prometheus.Gauge
	approvals *prometheus.CounterVec
	resumes   prometheus.Counter

	// alerts: the alerts gate's (alertsmetrics.go).
	alerts *alertMetrics

	mu         sync.Mutex
	haltedBy   map[types.NamespacedName]bool
	awaitingBy map[types.NamespacedName]int
}

func newGateMetrics() *gateMetrics {
	return &gateMetrics{
		halted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_halted",
			Help: "RebootPolicies whose rollout is halted (a restarted target did not become available in time).",
		}),
		awaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_awaiting_approval",
			Help: "Targets whose restart waits for an approval (spec.approval Required), over all RebootPolicies.",
		}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_approvals_total",
			Help: "Approvals (the approve annotation) taken, by whether they released a restart (released) or nothing waited (empty).",
		}, []string{"outcome"}),
		resumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_resumes_total",
			Help: "Resumes (the resume annotation) taken.",
		}),
		haltedBy: map[types.NamespacedName]bool{}, awaitingBy: map[types.NamespacedName]int{},
		alerts: newAlertMetrics(),
	}
}

func (g *gateMetrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{g.halted, g.awaiting, g.approvals, g.resumes}, g.alerts.collectors()...)
}

func (m *Metrics) setHalted(nn types.NamespacedName, halted bool) {
	if m == nil || m.gate == nil {
		return
	}
	g := m.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if halted {
		g.haltedBy[nn] = true
	} else {
		delete(g.haltedBy, nn)
	}
	g.halted.Set(float64(len(g.haltedBy)))
}

func (m *Metrics) setAwaiting(nn types.NamespacedName, n int) {
	if m == nil || m.gate == nil {
		return
	}
	g := m.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > 0 {
		g.awaitingBy[nn] = n
	} else {
		delete(g.awaitingBy, nn)
	}
	total := 0
	for _, v := range g.awaitingBy {
		total += v
	}
	g.awaiting.Set(float64(total))
}

// forgetGates drops a deleted or suspended policy from the gauges.
func (m *Metrics) forgetGates(nn types.NamespacedName) {
	m.setHalted(nn, false)
	m.setAwaiting(nn, 0)
	m.setBlockedByAlerts(nn, "")
}

func (m *Metrics) approved(released bool) {
	if m == nil || m.gate == nil {
		return
	}
	outcome := "empty"
	if released {
		outcome = "released"
	}
	m.gate.approvals.WithLabelValues(outcome).Inc()
}

func (m *Metrics) resumed() {
	if m == nil || m.gate == nil {
		return
	}
	m.gate.resumes.Inc()
}
