package nsscaler

import "github.com/prometheus/client_golang/prometheus"

// selfServiceMetrics count WakeRequest decisions and the grants in force.
type selfServiceMetrics struct {
	// wakeRequests: runbook_nsscaler_wake_requests_total{outcome}, the
	// outcome being the Granted condition's reason (Granted, Clipped, the
	// refusals, Expired, Withdrawn). No per-namespace label: tenants
	// create the requests, and must not be able to grow the series.
	wakeRequests *prometheus.CounterVec
	// tenantWakes: runbook_nsscaler_tenant_wakes{nsscaler}.
	tenantWakes *prometheus.GaugeVec
}

func newSelfServiceMetrics() selfServiceMetrics {
	return selfServiceMetrics{
		wakeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_nsscaler_wake_requests_total",
			Help: "WakeRequest decisions, by outcome (the Granted condition's reason).",
		}, []string{"outcome"}),
		tenantWakes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_tenant_wakes",
			Help: "WakeRequest grants in force, per NSScaler.",
		}, []string{"nsscaler"}),
	}
}

func (m selfServiceMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wakeRequests, m.tenantWakes}
}

// WakeRequests is the runbook_nsscaler_wake_requests_total counter (tests
// read it).
func (m *Metrics) WakeRequests() *prometheus.CounterVec { return m.wakeRequests }
