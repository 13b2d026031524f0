package rebootpolicy

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// The collectors looked up once per worker count exactly what a lookup per
// observation counted.
func TestProbeMetricsForType(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results []string
		want    map[string]float64
	}{
		{name: "none", want: map[string]float64{}},
		{name: "the three results", results: []string{autorebootv1alpha1.ResultSuccess, autorebootv1alpha1.ResultSuccess,
			autorebootv1alpha1.ResultFailure, autorebootv1alpha1.ResultError},
			want: map[string]float64{autorebootv1alpha1.ResultSuccess: 2, autorebootv1alpha1.ResultFailure: 1, autorebootv1alpha1.ResultError: 1}},
		{name: "a result outside them", results: []string{"Unknown", autorebootv1alpha1.ResultFailure},
			want: map[string]float64{"Unknown": 1, autorebootv1alpha1.ResultFailure: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics()
			pm := m.ForType(probe.TypeHTTP)
			for _, r := range tc.results {
				pm.Observe(r, time.Millisecond)
			}
			pm.ObserveDrift(-time.Second) // a timer that fired early counts as on time
			for _, r := range []string{autorebootv1alpha1.ResultSuccess, autorebootv1alpha1.ResultFailure, autorebootv1alpha1.ResultError, "Unknown"} {
				if got := counterValue(t, m.probeResults.WithLabelValues(probe.TypeHTTP, r)); got != tc.want[r] {
					t.Errorf("%s: %v, want %v", r, got, tc.want[r])
				}
				if got := counterValue(t, m.probeResults.WithLabelValues(probe.TypeTCP, r)); got != 0 {
					t.Errorf("%s of another type: %v", r, got)
				}
			}
			if got := histogramCount(t, m.probeDuration.WithLabelValues(probe.TypeHTTP)); got != uint64(len(tc.results)) {
				t.Errorf("durations observed %d, want %d", got, len(tc.results))
			}
			var d dto.Metric
			_ = m.probeDrift.WithLabelValues(probe.TypeHTTP).(prometheus.Metric).Write(&d)
			if d.GetHistogram().GetSampleCount() != 1 || d.GetHistogram().GetSampleSum() != 0 {
				t.Errorf("drift: %d samples, sum %v; want 1, 0", d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum())
			}
		})
	}
}

// Without metrics (tests, tools) observing does nothing.
func TestProbeMetricsNil(t *testing.T) {
	var m *Metrics
	pm := m.ForType(probe.TypeHTTP)
	if c, _ := pm.(*probeMetrics); c != nil {
		t.Fatal("collectors from nil metrics")
	}
	pm.Observe(autorebootv1alpha1.ResultSuccess, time.Second)
	pm.ObserveDrift(time.Second)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The sums over policies (pending restarts, halted policies, targets
// awaiting approval) count each policy's latest share once: a reconcile
// replaces its policy's share, and a policy set to 0 drops out.
func TestPolicySums(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do                        func()
		pending, halted, awaiting float64
	}{
		{do: func() { m.setPending(a, 3); m.setPending(b, 2) }, pending: 5},
		{do: func() { m.setPending(a, 1) }, pending: 3},
		{do: func() { m.setHalted(a, true); m.setHalted(a, true); m.setHalted(b, true) }, pending: 3, halted: 2},
		{do: func() { m.setAwaiting(b, 4); m.setHalted(b, false) }, pending: 3, halted: 1, awaiting: 4},
		{do: func() { m.setPending(b, 0); m.setAwaiting(a, 2) }, pending: 1, halted: 1, awaiting: 6},
		{do: func() { m.forgetGates(a); m.forgetGates(b); m.setPending(a, 0) }},
	}
	for i, s := range steps {
		s.do()
		got := gatheredGauges(t, reg, "runbook_rebootpolicy_pending_restarts", "runbook_rebootpolicy_halted", "runbook_rebootpolicy_awaiting_approval")
		if want := []float64{s.pending, s.halted, s.awaiting}; !slices.Equal(got, want) {
			t.Errorf("step %d: pending, halted, awaiting = %v, want %v", i, got, want)
		}
	}
}

// gatheredGauges are the values of the gauges names as reg exposes them.
func gatheredGauges(t *testing.T, reg prometheus.Gatherer, names ...string) []float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]float64{}
	for _, f := range families {
		if ms := f.GetMetric(); len(ms) == 1 && ms[0].GetGauge() != nil {
			exposed[f.GetName()] = ms[0].GetGauge().GetValue()
		}
	}
	values := make([]float64, len(names))
	for i, name := range names {
		v, ok := exposed[name]
		if !ok {
			t.Fatalf("gauge %s is not registered", name)
		}
		values[i] = v
	}
	return values
}
