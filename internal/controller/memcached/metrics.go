package memcached

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Metrics are the Memcached controller's own Prometheus collectors (beside
// controller-runtime's reconcile and workqueue metrics). Built in main and
// registered once with controller-runtime's registry; nil records nothing.
// Their labels are bounded (reasons and kinds are constants), never an
// object's name.
type Metrics struct {
	degraded *prometheus.CounterVec
	rollouts *prometheus.CounterVec
	restarts *prometheus.CounterVec
	renewals *prometheus.CounterVec
}

// NewMetrics builds the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_memcached_degraded_total",
			Help: "Transitions of a Memcached into Degraded=True, by reason (InvalidSpec, SecretNotUsable, ForeignObject, ...).",
		}, []string{"reason"}),
		rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_memcached_rollouts_total",
			Help: "Rollouts of the instances the controller started, by cause: config (the spec changed) or secret (the data of a TLS or auth Secret changed).",
		}, []string{"cause"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_memcached_warm_restarts_total",
			Help: "Restarts of the memcached container of a Memcached with warmRestart, by outcome: warm (the items were kept) or cold.",
		}, []string{"outcome"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_memcached_tls_renewals_total",
			Help: "Changes of a Memcached's serving certificate, by mode: in_place (a renewal the running instances loaded) or rolled (a new issuer or client CA; the instances were replaced).",
		}, []string{"mode"}),
	}
}

// Register adds the collectors to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.degraded, m.rollouts, m.restarts, m.renewals} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) degradedTo(reason string) {
	if m != nil {
		m.degraded.WithLabelValues(reason).Inc()
	}
}

// Rollout causes.
const (
	rolloutConfig = "config"
	rolloutSecret = "secret"
)

func (m *Metrics) rollout(cause string) {
	if m != nil {
		m.rollouts.WithLabelValues(cause).Inc()
	}
}

func (m *Metrics) restarted(outcome cachev1alpha1.RestartOutcome) {
	if m != nil {
		m.restarts.WithLabelValues(strings.ToLower(string(outcome))).Inc()
	}
}

// Renewal modes of runbook_memcached_tls_renewals_total.
const (
	renewalInPlace = "in_place"
	renewalRolled  = "rolled"
)

func (m *Metrics) tlsRenewal(mode string) {
	if m != nil {
		m.renewals.WithLabelValues(mode).Inc()
	}
}
