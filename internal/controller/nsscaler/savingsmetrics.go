package nsscaler

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

// savedCollector exports status.savings as counters, computed when scraped:
// each namespace's recorded totals plus its open interval up to the scrape.
// The values come from the status, so they continue across a manager
// restart instead of starting again from zero (a counter that reset would
// have Prometheus's increase() count the whole total twice). Series exist
// for the namespaces status.savings lists — those an NSScaler owns or holds
// parked — and go with them.
type savedCollector struct {
	podHours, cpuCoreHours, memoryGiBHours *prometheus.Desc

	mu    sync.Mutex
	clock clock.PassiveClock
	// byScaler is each NSScaler's last status.savings.
	byScaler map[string]*scalingv1alpha1.SavingsStatus
}

func newSavedCollector() *savedCollector {
	labels := []string{"nsscaler", "namespace"}
	return &savedCollector{
		podHours: prometheus.NewDesc("runbook_nsscaler_saved_pod_hours_total",
			"Pod-hours not run because an NSScaler held Deployments and StatefulSets parked.", labels, nil),
		cpuCoreHours: prometheus.NewDesc("runbook_nsscaler_saved_cpu_core_hours_total",
			"Requested CPU core-hours not run because an NSScaler held workloads parked.", labels, nil),
		memoryGiBHours: prometheus.NewDesc("runbook_nsscaler_saved_memory_gib_hours_total",
			"Requested memory GiB-hours not run because an NSScaler held workloads parked.", labels, nil),
		clock:    clock.RealClock{},
		byScaler: map[string]*scalingv1alpha1.SavingsStatus{},
	}
}

// setClock makes scrapes read the controller's clock.
func (c *savedCollector) setClock(clk clock.PassiveClock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock = clk
}

// set records an NSScaler's status.savings (nil: none).
func (c *savedCollector) set(name string, s *scalingv1alpha1.SavingsStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == nil {
		delete(c.byScaler, name)
		return
	}
	c.byScaler[name] = s.DeepCopy()
}

func (c *savedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.podHours
	ch <- c.cpuCoreHours
	ch <- c.memoryGiBHours
}

func (c *savedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for name, s := range c.byScaler {
		for _, ns := range s.Namespaces {
			t := savings.Namespace(ns, now)
			for _, m := range []struct {
				d *prometheus.Desc
				q resource.Quantity
			}{{c.podHours, t.PodHours}, {c.cpuCoreHours, t.CPUCoreHours}, {c.memoryGiBHours, t.MemoryGiBHours}} {
				ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, m.q.AsApproximateFloat64(), name, ns.Namespace)
			}
		}
	}
}
