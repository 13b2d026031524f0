// Package probetest scripts probes for the tests of the probe workers and
// of the controllers that run them: a Factory whose probers return what the
// test sets, and helpers that drive workers on a fake clock.
package probetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// Probers hands out probers whose results the test scripts, by the name of
// the policy they probe for. A policy with no script succeeds.
type Probers struct {
	mu      sync.Mutex
	results map[string][]string // by policy name; the last result repeats
	// observations, when set for a policy, are returned instead (the last
	// repeats): change and referenced triggers need fingerprints.
	observations map[string][]probe.Observation
	calls        map[string]*atomic.Int64
	created      map[string]int
	closed       map[string]int
}

var _ probe.Factory = &Probers{}

func NewProbers() *Probers {
	return &Probers{results: map[string][]string{}, observations: map[string][]probe.Observation{}, calls: map[string]*atomic.Int64{},
		created: map[string]int{}, closed: map[string]int{}}
}

// SetResults scripts the results of the policy's probes, in order.
func (f *Probers) SetResults(policy string, r ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[policy] = r
}

// SetObservations scripts whole observations (fingerprints included); they
// take precedence over SetResults.
func (f *Probers) SetObservations(policy string, o ...probe.Observation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observations[policy] = o
}

// Calls counts the probes made for the policy, across its probers.
func (f *Probers) Calls(policy string) *atomic.Int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[policy] == nil {
		f.calls[policy] = &atomic.Int64{}
	}
	return f.calls[policy]
}

// Counts is how many probers of the policy were created and closed.
func (f *Probers) Counts(policy string) (created, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created[policy], f.closed[policy]
}

func (f *Probers) NewProber(s probe.Spec) (probe.Prober, error) {
	calls := f.Calls(s.Name)
	f.mu.Lock()
	f.created[s.Name]++
	f.mu.Unlock()
	return &prober{f: f, policy: s.Name, calls: calls}, nil
}

type prober struct {
	f      *Probers
	policy string
	calls  *atomic.Int64
}

func (p *prober) Kind() string { return "fake" }

func (p *prober) Close() {
	p.f.mu.Lock()
	p.f.closed[p.policy]++
	p.f.mu.Unlock()
}

func (p *prober) Probe(context.Context) probe.Observation {
	n := int(p.calls.Add(1))
	p.f.mu.Lock()
	r := p.f.results[p.policy]
	obs := p.f.observations[p.policy]
	p.f.mu.Unlock()
	if len(obs) > 0 {
		return obs[min(n-1, len(obs)-1)]
	}
	res := autorebootv1alpha1.ResultSuccess
	if len(r) > 0 {
		res = r[min(n-1, len(r)-1)]
	}
	return probe.Observation{Result: res, Message: res}
}

// WaitFor polls cond until it holds; after 30 s the test fails naming what
// it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Tick advances the fake clock by one period once the worker waits on its
// timer, and waits until the worker has published the probe's result (not
// merely started the probe).
func Tick(t testing.TB, fc *clocktesting.FakeClock, w *probe.Workers, obj types.NamespacedName, policy string) {
	t.Helper()
	before := w.Snapshot(obj)[policy].Observed
	WaitFor(t, "worker timer", fc.HasWaiters)
	fc.Step(time.Second)
	WaitFor(t, "result published", func() bool { return w.Snapshot(obj)[policy].Observed > before })
}

// StartWorkers runs workers on a fake clock until the test ends.
func StartWorkers(t testing.TB, f probe.Factory, metrics probe.Metrics) (*probe.Workers, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := probe.NewWorkers(fc, f, metrics, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, fc
}

// DiscardMetrics records nothing, for tests that read the workers' state.
type DiscardMetrics struct{}

func (DiscardMetrics) ForType(string) probe.TypeMetrics { return DiscardMetrics{} }
func (DiscardMetrics) TriggerFired(string)              {}
func (DiscardMetrics) Observe(string, time.Duration)    {}
func (DiscardMetrics) ObserveDrift(time.Duration)       {}
