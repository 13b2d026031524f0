package nsscaler

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the NSScaler controller's Prometheus collectors. Build them
// once in main with NewMetrics and pass them to the Reconciler.
type Metrics struct {
	ParkedNamespaces *prometheus.GaugeVec
	ParkedWorkloads  *prometheus.GaugeVec
	PodsRemaining    *prometheus.GaugeVec
	ParkDuration     *prometheus.HistogramVec
	RestoreDuration  *prometheus.HistogramVec
	Writes           *prometheus.CounterVec
	// WritesAwaitingCache is the controller's own workload writes its
	// informer cache has not delivered yet (all NSScalers together: the
	// cache is shared). During a mass park it is the backlog of watch
	// events behind the writes; it returns to 0 once the cache caught up.
	WritesAwaitingCache prometheus.Gauge
	// saved are the runbook_nsscaler_saved_*_total counters.
	saved *savedCollector
	selfServiceMetrics
	// GitOps are the runbook_nsscaler_gitops_* collectors.
	GitOps GitOpsMetrics
}

// NewMetrics builds the collectors and registers them with reg (in the
// manager: controller-runtime's metrics.Registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := prometheus.ExponentialBuckets(0.01, 2, 14) // 10 ms .. ~80 s
	m := &Metrics{
		ParkedNamespaces: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_parked_namespaces",
			Help: "Namespaces an NSScaler holds parked.",
		}, []string{"nsscaler"}),
		ParkedWorkloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_parked_workloads",
			Help: "Workloads an NSScaler holds parked (original recorded, scaled to zero or suspended).",
		}, []string{"nsscaler"}),
		PodsRemaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_pods_remaining",
			Help: "Pods still present in an NSScaler's parked namespaces.",
		}, []string{"nsscaler"}),
		ParkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbook_nsscaler_park_duration_seconds",
			Help:    "Wall time of the park writes of one reconcile pass (passes that parked at least one workload).",
			Buckets: buckets,
		}, []string{"nsscaler"}),
		RestoreDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbook_nsscaler_restore_duration_seconds",
			Help:    "Wall time of the restore writes of one reconcile pass (passes that restored at least one workload).",
			Buckets: buckets,
		}, []string{"nsscaler"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_nsscaler_writes_total",
			Help: "Write requests to workloads, by operation (park, restore) and result (ok, conflict, error).",
		}, []string{"nsscaler", "operation", "result"}),
		WritesAwaitingCache: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_writes_awaiting_cache",
			Help: "Workload writes of the controller that its informer cache has not delivered yet.",
		}),
		saved:              newSavedCollector(),
		selfServiceMetrics: newSelfServiceMetrics(),
		GitOps:             newGitOpsMetrics(),
	}
	collectors := []prometheus.Collector{m.ParkedNamespaces, m.ParkedWorkloads, m.PodsRemaining, m.ParkDuration, m.RestoreDuration, m.Writes, m.WritesAwaitingCache, m.saved}
	collectors = append(collectors, m.selfServiceMetrics.collectors()...)
	for _, c := range append(collectors, m.GitOps.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering nsscaler metrics: %w", err)
		}
	}
	return m, nil
}

// forget drops the series of a deleted NSScaler.
func (m *Metrics) forget(name string) {
	m.ParkedNamespaces.DeleteLabelValues(name)
	m.ParkedWorkloads.DeleteLabelValues(name)
	m.PodsRemaining.DeleteLabelValues(name)
	m.ParkDuration.DeleteLabelValues(name)
	m.RestoreDuration.DeleteLabelValues(name)
	m.Writes.DeletePartialMatch(prometheus.Labels{"nsscaler": name})
	m.saved.set(name, nil)
	m.tenantWakes.DeleteLabelValues(name)
	m.forgetGitOps(name)
}

// SavedCollector is the collector of the runbook_nsscaler_saved_*_total
// counters (tests gather it).
func (m *Metrics) SavedCollector() prometheus.Collector { return m.saved }
