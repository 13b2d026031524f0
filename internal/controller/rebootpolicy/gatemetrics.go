package rebootpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// gateMetrics are the collectors of the health gate and approvals.
type gateMetrics struct {
	halted    *policySum
	awaiting  *policySum
	approvals *prometheus.CounterVec
	resumes   prometheus.Counter

	// alerts: the alerts gate's (alertsmetrics.go).
	alerts *alertMetrics
}

func newGateMetrics() *gateMetrics {
	return &gateMetrics{
		halted: newPolicySum(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_halted",
			Help: "RebootPolicies whose rollout is halted (a restarted target did not become available in time).",
		}),
		awaiting: newPolicySum(prometheus.GaugeOpts{
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
		alerts: newAlertMetrics(),
	}
}

func (g *gateMetrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{g.halted.gauge, g.awaiting.gauge, g.approvals, g.resumes}, g.alerts.collectors()...)
}

func (m *Metrics) setHalted(nn types.NamespacedName, halted bool) {
	if m == nil || m.gate == nil {
		return
	}
	n := 0
	if halted {
		n = 1
	}
	m.gate.halted.set(nn, n)
}

func (m *Metrics) setAwaiting(nn types.NamespacedName, n int) {
	if m == nil || m.gate == nil {
		return
	}
	m.gate.awaiting.set(nn, n)
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
