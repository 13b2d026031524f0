package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// fakeProbers hands out probers whose results the test scripts.
type fakeProbers struct {
	mu      sync.Mutex
	results map[string][]string // by policy name; the last result repeats
	// observations, when set for a policy, are returned instead (the last
	// repeats): change and referenced triggers need fingerprints.
	observations map[string][]Observation
	calls        map[string]*atomic.Int64
	created      map[string]int
	closed       map[string]int
}

func newFakeProbers() *fakeProbers {
	return &fakeProbers{results: map[string][]string{}, observations: map[string][]Observation{}, calls: map[string]*atomic.Int64{},
		created: map[string]int{}, closed: map[string]int{}}
}

func (f *fakeProbers) setResults(policy string, r ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[policy] = r
}

func (f *fakeProbers) callCounter(policy string) *atomic.Int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[policy] == nil {
		f.calls[policy] = &atomic.Int64{}
	}
	return f.calls[policy]
}

func (f *fakeProbers) counts(policy string) (created, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created[policy], f.closed[policy]
}

func (f *fakeProbers) NewProber(s Spec) (Prober, error) {
	calls := f.callCounter(s.Name)
	f.mu.Lock()
	f.created[s.Name]++
	f.mu.Unlock()
	return &fakeProber{f: f, policy: s.Name, calls: calls}, nil
}

type fakeProber struct {
	f      *fakeProbers
	policy string
	calls  *atomic.Int64
}

func (p *fakeProber) Kind() string { return "fake" }
func (p *fakeProber) Close() {
	p.f.mu.Lock()
	p.f.closed[p.policy]++
	p.f.mu.Unlock()
}
func (p *fakeProber) Probe(context.Context) Observation {
	n := p.calls.Add(1)
	p.f.mu.Lock()
	r := p.f.results[p.policy]
	obs := p.f.observations[p.policy]
	p.f.mu.Unlock()
	if len(obs) > 0 {
		return obs[min(int(n-1), len(obs)-1)]
	}
	res := ok
	if len(r) > 0 {
		i := int(n - 1)
		if i >= len(r) {
			i = len(r) - 1
		}
		res = r[i]
	}
	return Observation{Result: res, Message: res}
}

func probeSpec(obj types.NamespacedName, policy string, failureThreshold int32, hash string) WorkerSpec {
	return WorkerSpec{
		Key:  WorkerKey{Object: obj, Policy: policy},
		Hash: hash,
		Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(1)}},
			PeriodSeconds:    1,
			FailureThreshold: failureThreshold,
		}},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tick advances the fake clock by one period once the worker waits on its
// timer, and waits until the worker has published the probe's result (not
// merely started the probe).
func tick(t *testing.T, fc *clocktesting.FakeClock, w *Workers, obj types.NamespacedName, policy string) {
	t.Helper()
	before := w.Snapshot(obj)[policy].Observed
	waitFor(t, "worker timer", fc.HasWaiters)
	fc.Step(time.Second)
	waitFor(t, "result published", func() bool { return w.Snapshot(obj)[policy].Observed > before })
}

// discardMetrics records nothing: these tests read the workers' state.
type discardMetrics struct{}

func (discardMetrics) ForType(string) TypeMetrics    { return discardMetrics{} }
func (discardMetrics) TriggerFired(string)           {}
func (discardMetrics) Observe(string, time.Duration) {}
func (discardMetrics) ObserveDrift(time.Duration)    {}

func startWorkers(t *testing.T, f Factory) (*Workers, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := NewWorkers(fc, f, discardMetrics{}, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, fc
}

func TestWorkersLifecycle(t *testing.T) {
	f := newFakeProbers()
	w, _ := startWorkers(t, f)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}

	w.Ensure(a, []WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2")})
	w.Ensure(b, []WorkerSpec{probeSpec(b, "p1", 3, "h1")})
	if got := w.Len(); got != 3 {
		t.Fatalf("workers = %d (%v), want 3", got, w.Keys())
	}
	waitFor(t, "probers created", func() bool { c, _ := f.counts("p2"); return c == 1 })

	// Same spec again: nothing restarts.
	w.Ensure(a, []WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2")})
	if c, cl := f.counts("p2"); c != 1 || cl != 0 {
		t.Fatalf("unchanged spec restarted p2: created %d closed %d", c, cl)
	}
	// Only p2 of a changes: only it restarts.
	w.Ensure(a, []WorkerSpec{probeSpec(a, "p1", 3, "h1"), probeSpec(a, "p2", 3, "h2-new")})
	waitFor(t, "p2 restarted", func() bool { c, cl := f.counts("p2"); return c == 2 && cl == 1 })
	want := []string{"ns/a/p1@h1", "ns/a/p2@h2-new", "ns/b/p1@h1"}
	if got := w.Keys(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	// A policy removed from the spec stops.
	w.Ensure(a, []WorkerSpec{probeSpec(a, "p2", 3, "h2-new")})
	if got := w.Keys(); len(got) != 2 {
		t.Fatalf("keys after removing p1 of a = %v", got)
	}
	// Deleting a stops its workers and leaves b alone.
	w.Remove(a)
	if got := w.Keys(); len(got) != 1 || got[0] != "ns/b/p1@h1" {
		t.Fatalf("keys after removing a = %v", got)
	}
	waitFor(t, "a's probers closed", func() bool { _, cl := f.counts("p2"); return cl == 2 })
}

func TestWorkersDeclaredBeforeStartRunWhenLeading(t *testing.T) {
	f := newFakeProbers()
	fc := clocktesting.NewFakeClock(time.Now())
	w := NewWorkers(fc, f, discardMetrics{}, logr.Discard())
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []WorkerSpec{probeSpec(obj, "early", 3, "h")})
	if c, _ := f.counts("early"); c != 0 {
		t.Fatal("a worker started before the manager started the runnable (not leader)")
	}
	if !w.NeedLeaderElection() {
		t.Fatal("workers must run only in the leader")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	waitFor(t, "worker started", func() bool { c, _ := f.counts("early"); return c == 1 })
	cancel()
	<-done
	if _, cl := f.counts("early"); cl != 1 {
		t.Fatal("worker not stopped when the manager stopped")
	}
}

func TestWorkerPublishesOnlyTransitions(t *testing.T) {
	f := newFakeProbers()
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []WorkerSpec{probeSpec(obj, "steady", 3, "h")})
	for range 50 {
		tick(t, fc, w, obj, "steady")
	}
	events := len(w.Events())
	if events != 1 {
		t.Fatalf("50 successful probes produced %d notifications, want 1", events)
	}
	v := w.Snapshot(obj)["steady"]
	if v.State.LastResult != ok || v.Unacked {
		t.Fatalf("state = %+v", v)
	}
}

func TestWorkerFiresAtThresholdAndAck(t *testing.T) {
	f := newFakeProbers()
	f.setResults("p", ok, fail, fail, fail, fail)
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []WorkerSpec{probeSpec(obj, "p", 3, "h")})
	for range 3 {
		tick(t, fc, w, obj, "p")
	}
	if v := w.Snapshot(obj)["p"]; v.State.FireSeq != 0 || v.State.LastResult != fail || v.State.ConsecutiveFailures != 1 {
		t.Fatalf("after 2 failures: %+v", v)
	}
	tick(t, fc, w, obj, "p")
	v := w.Snapshot(obj)["p"]
	if v.State.FireSeq != 1 || !v.Unacked || v.State.ConsecutiveFailures != 3 {
		t.Fatalf("after 3 failures: %+v", v)
	}
	if !v.State.FiredAt.Equal(fc.Now()) {
		t.Fatalf("fired at %v, want the injected clock's %v", v.State.FiredAt, fc.Now())
	}
	w.Ack(obj, "p", "other-hash", 1)
	if !w.Snapshot(obj)["p"].Unacked {
		t.Fatal("an ack for another spec hash was applied")
	}
	w.Ack(obj, "p", "h", 1)
	if w.Snapshot(obj)["p"].Unacked {
		t.Fatal("ack not applied")
	}
	// One more failure: below the threshold again, no new fire.
	tick(t, fc, w, obj, "p")
	if v := w.Snapshot(obj)["p"]; v.State.FireSeq != 1 || v.Unacked {
		t.Fatalf("fired again after one failure: %+v", v)
	}
}

// A probe that keeps failing while its restart is due does not fire (and
// notify the controller) on every period: the fires would merge into that
// restart. Once status says the restart is done, the next failure fires.
func TestWorkerMergesFiresWhileTheRestartIsDue(t *testing.T) {
	f := newFakeProbers()
	f.setResults("p", fail)
	w, fc := startWorkers(t, f)
	obj := types.NamespacedName{Namespace: "ns", Name: "x"}
	w.Ensure(obj, []WorkerSpec{probeSpec(obj, "p", 1, "h")})
	expect := func(step string, seq uint64, notifications int) {
		t.Helper()
		if v := w.Snapshot(obj)["p"]; v.State.FireSeq != seq {
			t.Fatalf("%s: fire seq %d, want %d", step, v.State.FireSeq, seq)
		}
		if n := len(w.Events()); n != notifications {
			t.Fatalf("%s: %d notifications, want %d", step, n, notifications)
		}
		for range notifications {
			<-w.Events()
		}
	}
	tick(t, fc, w, obj, "p")
	expect("first failure", 1, 1)
	for range 3 {
		tick(t, fc, w, obj, "p")
	}
	expect("failures before the fire is in status", 1, 0)
	w.Ack(obj, "p", "h", 1)
	w.MarkPending(obj, "p", true)
	for range 3 {
		tick(t, fc, w, obj, "p")
	}
	expect("failures while status holds the restart pending", 1, 0)
	w.MarkPending(obj, "p", false)
	tick(t, fc, w, obj, "p")
	expect("first failure after the restart", 2, 1)
	w.MarkPending(obj, "other", true) // an unknown policy is ignored
}

func TestWorkerChangeBaselineFromStatus(t *testing.T) {
	spec := WorkerSpec{
		Key:      WorkerKey{Object: types.NamespacedName{Namespace: "ns", Name: "x"}, Policy: "q"},
		Hash:     "h1",
		Trigger:  autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{Query: "select 1", PeriodSeconds: 1, TimeoutSeconds: 1}},
		Baseline: PolicyState{Fingerprint: "abc", TriggerHash: "h1", LastResult: ok},
	}
	if st := newTriggerStateFor(spec); st.published.Fingerprint != "abc" {
		t.Fatalf("baseline not restored: %+v", st.published)
	}
	spec.Hash = "h2" // the query changed: the old baseline does not apply
	if st := newTriggerStateFor(spec); st.published.Fingerprint != "" {
		t.Fatalf("stale baseline kept after a trigger change: %+v", st.published)
	}
}

func TestWorkerSchedule(t *testing.T) {
	wk := &worker{spec: WorkerSpec{Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{PeriodSeconds: 2, TimeoutSeconds: 5, InitialDelaySeconds: 7}}}}
	period, timeout, delay := wk.schedule()
	if period != 2*time.Second || timeout != 2*time.Second || delay != 7*time.Second {
		t.Fatalf("schedule = %s %s %s (timeout must not exceed the period)", period, timeout, delay)
	}
}

func TestStartWithAnEndedContextLaunchesNothing(t *testing.T) {
	w := NewWorkers(clocktesting.NewFakeClock(time.Now()), newFakeProbers(), discardMetrics{}, logr.Discard())
	obj := types.NamespacedName{Namespace: "ns", Name: "a"}
	w.Ensure(obj, []WorkerSpec{probeSpec(obj, "p", 1, "h")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Len() != 1 {
		t.Fatalf("%d workers declared, want 1 (declared, never launched)", w.Len())
	}
}
