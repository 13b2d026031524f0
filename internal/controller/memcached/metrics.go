package memcached

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Memcached controller's own Prometheus collectors (beside
// controller-runtime's reconcile and workqueue metrics). Built in main and
// registered once with controller-runtime's registry; nil records nothing.
// Their labels are bounded (reasons and kinds are constants), never an
// object's name.
type Metrics struct {
	degraded *prometheus.CounterVec
	rollouts *prometheus.CounterVec
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
	}
}

// Register adds the collectors to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.degraded, m.rollouts} {
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
