package egress

import "github.com/prometheus/client_golang/prometheus"

// NewDeniedCounter builds the counter WithDeniedCounter expects; the caller
// registers it (controller-runtime's metrics.Registry in main).
func NewDeniedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runbook_probe_dials_denied_total",
		Help: "Probe dials refused by the manager's network policy, by the rule that refused them.",
	}, []string{"category"})
}

// WithDeniedCounter returns a copy of p that counts denials in c by
// category; p itself is left unchanged so it stays safe to share.
func (p *Policy) WithDeniedCounter(c *prometheus.CounterVec) *Policy {
	cp := *p
	cp.denied = c
	return &cp
}
