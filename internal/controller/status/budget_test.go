package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

func droppedCount(t *testing.T, b *EventBudget, controller, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := b.dropped.WithLabelValues(controller, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// wave is what happens at one moment of a test: the clock moves on by
// after, then normals Normal and warnings Warning events are recorded.
type wave struct {
	after             time.Duration
	normals, warnings int
	// wantNormals and wantWarnings are the events that get through.
	wantNormals, wantWarnings int
}

// A flood yields the burst at once and the rate after; the rest is
// dropped and counted, never queued; a fifth of the burst is kept for
// Warnings, and a nil budget bounds nothing.
func TestEventBudget(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nilBudget  bool
		qps        float64
		burst      int
		waves      []wave
		logEntries int
	}{
		{name: "a Normal flood gets the burst less the Warnings' reserve", qps: 20, burst: 100,
			waves:      []wave{{normals: 5000, wantNormals: 80}},
			logEntries: 1},
		{name: "a Warning flood gets the whole burst", qps: 20, burst: 100,
			waves:      []wave{{warnings: 5000, wantWarnings: 100}},
			logEntries: 1},
		{name: "within the burst nothing is dropped", qps: 20, burst: 100,
			waves: []wave{{normals: 80, warnings: 20, wantNormals: 80, wantWarnings: 20}}},
		{name: "Warnings after a Normal flood get the reserve", qps: 20, burst: 100,
			waves: []wave{
				{normals: 1000, wantNormals: 80},
				{warnings: 1000, wantWarnings: 20},
			},
			logEntries: 1},
		{name: "the budget refills at the rate, Warnings first", qps: 20, burst: 100,
			waves: []wave{
				{normals: 1000, warnings: 1000, wantNormals: 80, wantWarnings: 20},
				{after: time.Second, normals: 1000, warnings: 10, wantWarnings: 10},
				{after: 500 * time.Millisecond, normals: 1000, warnings: 1000, wantWarnings: 20},
				{after: time.Second, normals: 1000, wantNormals: 0},
				// A full refill, logged again a minute after the first line.
				{after: time.Minute, normals: 1000, warnings: 1000, wantNormals: 80, wantWarnings: 20},
			},
			logEntries: 2},
		{name: "Normals take the refill beyond the reserve", qps: 20, burst: 100,
			waves: []wave{
				{normals: 1000, wantNormals: 80},
				{after: 2 * time.Second, normals: 1000, wantNormals: 40},
				{after: 100 * time.Millisecond, normals: 1000, wantNormals: 2},
			},
			logEntries: 1},
		{name: "a nil budget bounds nothing", nilBudget: true,
			waves: []wave{{normals: 5000, warnings: 5000, wantNormals: 5000, wantWarnings: 5000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var logged []string
			log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
			var budget *EventBudget
			if !tc.nilBudget {
				budget = NewEventBudget(tc.qps, tc.burst, clk, log)
			}
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant"}}
			var wantDropped [2]int
			for i, w := range tc.waves {
				clk.SetTime(clk.Now().Add(w.after))
				rec := events.NewFakeRecorder(w.normals + w.warnings)
				ev := Events{Recorder: budget.Recorder("rebootpolicy", rec)}
				for range w.normals {
					ev.Normal(obj, nil, "Fired", "Fire", "fired")
				}
				for range w.warnings {
					ev.Warning(obj, nil, "ProbeFailed", "Probe", "failed")
				}
				var normals, warnings int
				for _, e := range drain(rec) {
					switch {
					case strings.HasPrefix(e, "Normal Fired "):
						normals++
					case strings.HasPrefix(e, "Warning ProbeFailed "):
						warnings++
					default:
						t.Fatalf("wave %d: recorded %q", i, e)
					}
				}
				if normals != w.wantNormals || warnings != w.wantWarnings {
					t.Fatalf("wave %d: recorded %d Normal and %d Warning events, want %d and %d",
						i, normals, warnings, w.wantNormals, w.wantWarnings)
				}
				wantDropped[0] += w.normals - normals
				wantDropped[1] += w.warnings - warnings
			}
			if budget == nil {
				return
			}
			for i, reason := range []string{"Fired", "ProbeFailed"} {
				if got := droppedCount(t, budget, "rebootpolicy", reason); got != float64(wantDropped[i]) {
					t.Errorf("runbook_events_dropped_total{reason=%q} = %v, want %d", reason, got, wantDropped[i])
				}
			}
			if len(logged) != tc.logEntries {
				t.Errorf("%d log entries about drops, want %d: %q", len(logged), tc.logEntries, logged)
			}
		})
	}
}

// One budget bounds every controller of the manager together: what one
// spends, another cannot, and the drop is counted under the controller
// that lost its event.
func TestEventBudgetIsSharedByControllers(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := NewEventBudget(1, 10, clk, logr.Discard())
	reg := prometheus.NewPedanticRegistry()
	if err := budget.Register(reg); err != nil {
		t.Fatal(err)
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	flooder, other := events.NewFakeRecorder(100), events.NewFakeRecorder(100)
	for range 100 {
		Events{Recorder: budget.Recorder("rebootpolicy", flooder)}.Warning(obj, nil, "ProbeFailed", "Probe", "failed")
	}
	Events{Recorder: budget.Recorder("memcached", other)}.Warning(obj, nil, "Degraded", "Reconcile", "degraded")
	if got, want := len(drain(flooder)), 10; got != want {
		t.Fatalf("the flooding controller recorded %d events, want %d", got, want)
	}
	if got := drain(other); len(got) != 0 {
		t.Fatalf("the other controller recorded %q past the spent budget", got)
	}
	if got := droppedCount(t, budget, "memcached", "Degraded"); got != 1 {
		t.Fatalf("memcached's dropped Degraded events = %v, want 1", got)
	}
	if got := droppedCount(t, budget, "rebootpolicy", "ProbeFailed"); got != 90 {
		t.Fatalf("rebootpolicy's dropped ProbeFailed events = %v, want 90", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "runbook_events_dropped_total" {
		t.Fatalf("registered %v, want runbook_events_dropped_total", families)
	}
	// The labels say which controller and reason, never which object.
	for _, m := range families[0].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != "controller" && l.GetName() != "reason" {
				t.Fatalf("label %s=%s on the dropped-events counter", l.GetName(), l.GetValue())
			}
		}
	}
}

// A reconcile's batch still records nothing before Flush and, after it, in
// the order added; over the budget the first events of the batch are the
// ones recorded.
func TestBatchUnderTheBudget(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := NewEventBudget(1, 5, clk, logr.Discard())
	rec := events.NewFakeRecorder(20)
	b := Events{Recorder: budget.Recorder("nsscaler", rec)}.Batch()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	for i := range 8 {
		b.Warning(obj, nil, fmt.Sprintf("Reason%d", i), "Reconcile", "event %d", i)
	}
	if got := drain(rec); len(got) != 0 {
		t.Fatalf("recorded before Flush: %q", got)
	}
	b.Flush()
	want := []string{"Warning Reason0 event 0", "Warning Reason1 event 1", "Warning Reason2 event 2",
		"Warning Reason3 event 3", "Warning Reason4 event 4"}
	if got := drain(rec); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := 5; i < 8; i++ {
		if got := droppedCount(t, budget, "nsscaler", fmt.Sprintf("Reason%d", i)); got != 1 {
			t.Fatalf("dropped Reason%d = %v, want 1", i, got)
		}
	}
}
