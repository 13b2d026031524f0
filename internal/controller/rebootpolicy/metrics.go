package rebootpolicy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/probe"
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
	// Governance of restarts (settle, windows, throttle) and notifications.
	pendingRestarts  *policySum
	restartsInFlight prometheus.Gauge
	throttled        *prometheus.CounterVec
	notifications    *prometheus.CounterVec
	restartRequests  prometheus.Counter
	// gate: the health gate's and approvals' collectors (gatemetrics.go).
	gate *gateMetrics
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
		dialsDenied: egress.NewDeniedCounter(),
		pendingRestarts: newPolicySum(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_pending_restarts",
			Help: "Targets whose restart waits (settle delay, restart window, throttle, cooldown, rollout), over all RebootPolicies.",
		}),
		restartsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runbook_rebootpolicy_restarts_in_progress",
			Help: "Restarts whose rollout has not finished (what --max-concurrent-restarts bounds).",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_restarts_throttled_total",
			Help: "Restarts deferred by a limit: manager (--max-concurrent-restarts) or policy (spec.rollout.maxConcurrent).",
		}, []string{"limit"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_notifications_total",
			Help: "Webhook notifications by outcome: sent, retried, failed (gave up), refused (Secret, URL or network policy), dropped (queue full).",
		}, []string{"outcome"}),
		restartRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runbook_rebootpolicy_restart_requests_total",
			Help: "Restart requests (the restart-request annotation) taken.",
		}),
		gate: newGateMetrics(),
	}
}

// Register adds the collectors to reg (controller-runtime's metrics.Registry
// in main; a fresh registry in tests).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.probeResults, m.probeDuration, m.probeDrift, m.triggers, m.restarts, m.restartLatency, m.dialsDenied,
		m.pendingRestarts.gauge, m.restartsInFlight, m.throttled, m.notifications, m.restartRequests} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, c := range m.gate.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// policySum is a gauge of counts summed over RebootPolicies. Each policy's
// own count is kept, so that a reconcile replaces only its policy's share
// and a deleted policy takes exactly its share away.
type policySum struct {
	gauge prometheus.Gauge

	mu    sync.Mutex
	by    map[types.NamespacedName]int
	total int
}

func newPolicySum(opts prometheus.GaugeOpts) *policySum {
	return &policySum{gauge: prometheus.NewGauge(opts), by: map[types.NamespacedName]int{}}
}

// set makes n (0 when the policy is deleted or idle) nn's share.
func (s *policySum) set(nn types.NamespacedName, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += n - s.by[nn]
	if n > 0 {
		s.by[nn] = n
	} else {
		delete(s.by, nn)
	}
	s.gauge.Set(float64(s.total))
}

// probeMetrics are the collectors of one trigger type with their labels
// already looked up: a worker observes every period, and a label lookup
// hashes and locks each time.
type probeMetrics struct {
	success, failure, errored prometheus.Counter
	duration, drift           prometheus.Observer
	// results finds the counter of a result outside the three above.
	results *prometheus.CounterVec
	typ     string
}

// ForType returns the collectors of trigger type typ; a nil one when m is
// nil (its methods then do nothing).
func (m *Metrics) ForType(typ string) probe.TypeMetrics {
	if m == nil {
		return (*probeMetrics)(nil) // its methods do nothing
	}
	return &probeMetrics{
		success:  m.probeResults.WithLabelValues(typ, autorebootv1alpha1.ResultSuccess),
		failure:  m.probeResults.WithLabelValues(typ, autorebootv1alpha1.ResultFailure),
		errored:  m.probeResults.WithLabelValues(typ, autorebootv1alpha1.ResultError),
		duration: m.probeDuration.WithLabelValues(typ),
		drift:    m.probeDrift.WithLabelValues(typ),
		results:  m.probeResults,
		typ:      typ,
	}
}

// Observe counts one result and its duration.
func (pm *probeMetrics) Observe(result string, d time.Duration) {
	if pm == nil {
		return
	}
	switch result {
	case autorebootv1alpha1.ResultSuccess:
		pm.success.Inc()
	case autorebootv1alpha1.ResultFailure:
		pm.failure.Inc()
	case autorebootv1alpha1.ResultError:
		pm.errored.Inc()
	default:
		pm.results.WithLabelValues(pm.typ, result).Inc()
	}
	pm.duration.Observe(d.Seconds())
}

// ObserveDrift records how late a probe started (never below 0).
func (pm *probeMetrics) ObserveDrift(d time.Duration) {
	if pm == nil {
		return
	}
	pm.drift.Observe(max(d, 0).Seconds())
}

// TriggerFired counts a fire of a trigger of type typ.
func (m *Metrics) TriggerFired(typ string) {
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

// setPending records how many targets of one RebootPolicy wait (0 when it
// is deleted or idle).
func (m *Metrics) setPending(nn types.NamespacedName, n int) {
	if m == nil {
		return
	}
	m.pendingRestarts.set(nn, n)
}

func (m *Metrics) setInProgress(n int) {
	if m == nil {
		return
	}
	m.restartsInFlight.Set(float64(n))
}

func (m *Metrics) throttledBy(limit string) {
	if m == nil {
		return
	}
	m.throttled.WithLabelValues(limit).Inc()
}

// Notification counts a webhook notification by outcome.
func (m *Metrics) Notification(outcome string) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(outcome).Inc()
}

func (m *Metrics) restartRequested() {
	if m == nil {
		return
	}
	m.restartRequests.Inc()
}
