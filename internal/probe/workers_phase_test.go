package probe

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// discardMetrics records nothing: these tests read the workers' state.
type discardMetrics struct{}

func (discardMetrics) ForType(string) TypeMetrics    { return discardMetrics{} }
func (discardMetrics) TriggerFired(string)           {}
func (discardMetrics) Observe(string, time.Duration) {}
func (discardMetrics) ObserveDrift(time.Duration)    {}

func TestPhaseOffsetSpreadsConsecutiveWorkers(t *testing.T) {
	tests := []struct {
		name  string
		first uint64
		n     int
		// gap is the spacing of the sorted offsets of n consecutive workers.
		gap float64
	}{
		{"the first worker", 0, 1, 1},
		{"the first two", 0, 2, 0.5},
		{"the first eight", 0, 8, 0.125},
		{"128 declared after 4 others", 128, 128, 1.0 / 128},
		{"a namespace's 64 probes after 10,112 others", 10112, 64, 1.0 / 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			offsets := make([]float64, tt.n)
			for i := range tt.n {
				offsets[i] = phaseOffset(tt.first + uint64(i))
				if offsets[i] < 0 || offsets[i] >= 1 {
					t.Fatalf("offset %d = %v, want within [0, 1)", i, offsets[i])
				}
			}
			slices.Sort(offsets)
			for i := 1; i < tt.n; i++ {
				if d := offsets[i] - offsets[i-1]; d < tt.gap*0.999 || d > tt.gap*1.001 {
					t.Fatalf("offsets %v: gap %v at %d, want %v", offsets, d, i, tt.gap)
				}
			}
			if tt.n > 1 && offsets[0] > tt.gap {
				t.Fatalf("offsets %v leave a gap of %v at the start, want at most %v", offsets, offsets[0], tt.gap)
			}
		})
	}
}

func TestFirstProbeIsOnThePeriodsGrid(t *testing.T) {
	grid := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		now          time.Time
		initialDelay time.Duration
		period       time.Duration
		phase        float64
		want         time.Time
	}{
		{"on a grid point, phase 0: one period later, never at once", grid, 0, time.Second, 0, grid.Add(time.Second)},
		{"on a grid point, half a period in", grid, 0, time.Second, 0.5, grid.Add(500 * time.Millisecond)},
		{"past this period's offset: the next period's", grid.Add(700 * time.Millisecond), 0, time.Second, 0.5, grid.Add(1500 * time.Millisecond)},
		{"before this period's offset", grid.Add(200 * time.Millisecond), 0, time.Second, 0.5, grid.Add(500 * time.Millisecond)},
		{"after the initial delay", grid.Add(200 * time.Millisecond), 3 * time.Second, time.Second, 0.25, grid.Add(3250 * time.Millisecond)},
		{"a 10 s period", grid.Add(4 * time.Second), 0, 10 * time.Second, 0.75, grid.Add(7500 * time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := firstProbe(tt.now, tt.initialDelay, tt.period, tt.phase); !got.Equal(tt.want) {
				t.Fatalf("firstProbe = %s, want %s", got.Sub(grid), tt.want.Sub(grid))
			}
		})
	}
}

// Workers get their phases in the order they are declared, counted per
// period, so a period's workers stay spread whatever other periods run.
func TestWorkersTakePhasesPerPeriod(t *testing.T) {
	// Never started: no prober is made, so no factory is needed.
	w := NewWorkers(nil, nil, discardMetrics{}, logr.Discard())
	specOf := func(name string, period int32) WorkerSpec {
		return WorkerSpec{
			Key:     WorkerKey{Object: types.NamespacedName{Namespace: "ns", Name: name}, Policy: "p"},
			Hash:    "h",
			Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{PeriodSeconds: period, FailureThreshold: 1}},
		}
	}
	declared := []struct {
		name   string
		period int32
		want   float64
	}{
		{"a", 1, 0}, {"b", 10, 0}, {"c", 1, 0.5}, {"d", 1, 0.25}, {"e", 10, 0.5}, {"f", 1, 0.75},
	}
	for _, d := range declared {
		s := specOf(d.name, d.period)
		w.Ensure(s.Key.Object, []WorkerSpec{s})
	}
	for _, d := range declared {
		wk := w.byObj[types.NamespacedName{Namespace: "ns", Name: d.name}]["p"]
		if wk.phase != d.want {
			t.Errorf("%s (period %ds): phase %v, want %v", d.name, d.period, wk.phase, d.want)
		}
	}
}
