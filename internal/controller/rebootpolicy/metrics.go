package rebootpolicy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runbook-dev/runbook/internal/netpolicy"
)

// Metrics are the RebootPolicy controller's Prometheus collectors. They are
// built in main and registered once with controller-runtime's registry.
type Metrics struct {
	probeResults   *prometheus.CounterVec
	probeDuration  *prometheus.HistogramVec
	probeDrift     *prometheus.HistogramVec
	triggers       *prometheus.CounterVec
	restarts       *prometheus.CounterVec
	restartLatency prometheus.Histogram
	dialsDenied    *prometheus.CounterVec
}

// NewMetrics builds the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		probeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_probe_results_total",
			Help: "Probe, query and watch results by trigger type and result (Success, Failure, Error).",
		}, []string{"type", "result"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbook_rebootpolicy_probe_duration_seconds",
			Help:    "Duration of one probe, query or watch read by trigger type.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"type"}),
		probeDrift: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbook_rebootpolicy_probe_schedule_drift_seconds",
			Help:    "How late a probe started compared with its schedule.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"type"}),
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_triggers_total",
			Help: "Times a policy's trigger fired, by trigger type.",
		}, []string{"type"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_restarts_total",
			Help: "Target restarts by kind and outcome (restarted, skipped, failed).",
		}, []string{"kind", "outcome"}),
		restartLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "runbook_rebootpolicy_restart_latency_seconds",
			Help:    "Time from a trigger firing to the restart patch (cooldown waits included).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		dialsDenied: netpolicy.NewDeniedCounter(),
	}
}

// Register adds the collectors to reg (controller-runtime's metrics.Registry
// in main; a fresh registry in tests).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.probeResults, m.probeDuration, m.probeDrift, m.triggers, m.restarts, m.restartLatency, m.dialsDenied} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) observeProbe(typ, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.probeResults.WithLabelValues(typ, result).Inc()
	m.probeDuration.WithLabelValues(typ).Observe(d.Seconds())
}

func (m *Metrics) observeDrift(typ string, d time.Duration) {
	if m == nil {
		return
	}
	if d < 0 {
		d = 0
	}
	m.probeDrift.WithLabelValues(typ).Observe(d.Seconds())
}

func (m *Metrics) triggerFired(typ string) {
	if m == nil {
		return
	}
	m.triggers.WithLabelValues(typ).Inc()
}

func (m *Metrics) restart(kind, outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	m.restarts.WithLabelValues(kind, outcome).Inc()
	if outcome == "restarted" && latency > 0 {
		m.restartLatency.Observe(latency.Seconds())
	}
}
