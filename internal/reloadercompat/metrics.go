package reloadercompat

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Workload states of the workloads gauge.
const (
	// stateTracked: the workload has its compat RebootPolicy.
	stateTracked = "tracked"
	// stateIdle: annotated, but nothing to track (e.g. search mode and no
	// referenced object carries the match annotation).
	stateIdle = "idle"
	// stateRefused: the namespace's limit, or a RebootPolicy of the name
	// that is not the compat mode's.
	stateRefused = "refused"
)

// Metrics count the workloads the compat mode handles. Restarts, triggers
// and their latency are the RebootPolicy controller's metrics.
type Metrics struct {
	workloads *prometheus.GaugeVec

	mu    sync.Mutex
	state map[workloadKey]string
}

type workloadKey struct {
	kind autorebootv1alpha1.TargetKind
	nn   types.NamespacedName
}

// NewMetrics builds the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		workloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_reloadercompat_workloads",
			Help: "Workloads with Reloader annotations by kind and state (tracked, idle: nothing to track, refused: over --reloader-compat-max-per-namespace or a name clash).",
		}, []string{"kind", "state"}),
		state: map[workloadKey]string{},
	}
}

// Register adds the collectors to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	return reg.Register(m.workloads)
}

func (m *Metrics) set(kind autorebootv1alpha1.TargetKind, nn types.NamespacedName, state string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := workloadKey{kind, nn}
	if prev, ok := m.state[k]; ok {
		if prev == state {
			return
		}
		m.workloads.WithLabelValues(string(kind), prev).Dec()
	}
	m.state[k] = state
	m.workloads.WithLabelValues(string(kind), state).Inc()
}

func (m *Metrics) forget(kind autorebootv1alpha1.TargetKind, nn types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := workloadKey{kind, nn}
	if prev, ok := m.state[k]; ok {
		m.workloads.WithLabelValues(string(kind), prev).Dec()
		delete(m.state, k)
	}
}
