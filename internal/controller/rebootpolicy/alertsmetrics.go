package rebootpolicy

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// alertMetrics are the collectors of the alerts gate.
type alertMetrics struct {
	blocked  *prometheus.GaugeVec
	queries  *prometheus.CounterVec
	duration prometheus.Histogram

	mu        sync.Mutex
	blockedBy map[types.NamespacedName]string
}

func newAlertMetrics() *alertMetrics {
	m := &alertMetrics{
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_blocked_by_alerts",
			Help: "RebootPolicies whose pending restarts wait for the alerts gate (spec.blockingAlerts), by reason: BlockedByAlerts, AlertsUnavailable, AlertsNotConfigured.",
		}, []string{"reason"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_alert_queries_total",
			Help: "Queries of the --prometheus-url Prometheus (one per namespace waited on per interval), by outcome: answered, unreachable, invalid (an unusable answer), skipped (Prometheus was unreachable earlier in the round).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runbook_rebootpolicy_alert_query_duration_seconds",
			Help:    "Duration of one query of the --prometheus-url Prometheus.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		blockedBy: map[types.NamespacedName]string{},
	}
	// Each reason is exposed at 0 from the start, so that an alert on it
	// has a series to compare.
	for _, r := range []string{autorebootv1alpha1.ReasonBlockedByAlerts, autorebootv1alpha1.ReasonAlertsUnavailable, autorebootv1alpha1.ReasonAlertsNotConfigured} {
		m.blocked.WithLabelValues(r)
	}
	return m
}

func (a *alertMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.blocked, a.queries, a.duration}
}

// setBlockedByAlerts records why nn's restarts wait for the alerts gate
// ("" when they do not).
func (m *Metrics) setBlockedByAlerts(nn types.NamespacedName, reason string) {
	if m == nil || m.gate == nil || m.gate.alerts == nil {
		return
	}
	a := m.gate.alerts
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.blockedBy[nn] == reason {
		return
	}
	if reason == "" {
		delete(a.blockedBy, nn)
	} else {
		a.blockedBy[nn] = reason
	}
	counts := map[string]int{autorebootv1alpha1.ReasonBlockedByAlerts: 0, autorebootv1alpha1.ReasonAlertsUnavailable: 0, autorebootv1alpha1.ReasonAlertsNotConfigured: 0}
	for _, r := range a.blockedBy {
		counts[r]++
	}
	for r, n := range counts {
		a.blocked.WithLabelValues(r).Set(float64(n))
	}
}

// AlertQuery counts one query of Prometheus (alerts.Observer).
func (m *Metrics) AlertQuery(outcome string, d time.Duration) {
	if m == nil || m.gate == nil || m.gate.alerts == nil {
		return
	}
	m.gate.alerts.queries.WithLabelValues(outcome).Inc()
	if outcome != "skipped" {
		m.gate.alerts.duration.Observe(d.Seconds())
	}
}
