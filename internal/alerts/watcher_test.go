package alerts

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakePrometheus answers from a map and counts queries per namespace.
type fakePrometheus struct {
	mu       sync.Mutex
	firing   map[string][]string
	err      error
	asked    map[string]int
	inFlight int
	maxSeen  int
	gate     chan struct{} // nil: answer at once
}

func newFakePrometheus() *fakePrometheus {
	return &fakePrometheus{firing: map[string][]string{}, asked: map[string]int{}}
}

func (f *fakePrometheus) Firing(ctx context.Context, ns string) ([]string, error) {
	f.mu.Lock()
	f.asked[ns]++
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	return f.firing[ns], f.err
}

func (f *fakePrometheus) set(ns string, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.firing[ns] = names
}

func (f *fakePrometheus) count(ns string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[ns]
}

func (f *fakePrometheus) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.asked {
		n += v
	}
	return n
}

type countingObserver struct {
	mu       sync.Mutex
	outcomes map[string]int
}

func (o *countingObserver) AlertQuery(outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[outcome]++
}

func (o *countingObserver) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[outcome]
}

// tick lets an interval pass once the watcher waits for it.
func tick(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	waitFor(t, clk.HasWaiters)
	clk.Step(30 * time.Second)
}

// startWatcher runs w until the test ends and waits until it waits on its
// timer.
func startWatcher(t *testing.T, w *Watcher, clk *clocktesting.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.After(10 * time.Second)
	for !clk.HasWaiters() {
		select {
		case <-deadline:
			t.Fatal("the watcher did not start its timer")
		default:
			// Yield until the watcher's goroutine has run.
			waitABit()
		}
	}
}

func waitABit() { <-time.After(time.Millisecond) }

// nextEvents reads n events.
func nextEvents(t *testing.T, w *Watcher, n int) []types.NamespacedName {
	t.Helper()
	var out []types.NamespacedName
	for range n {
		select {
		case e := <-w.Events():
			out = append(out, e.Object)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d events", len(out), n)
		}
	}
	return out
}

func noEvent(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case e := <-w.Events():
		t.Fatalf("unexpected event for %s", e.Object)
	default:
	}
}

func TestWatcherAnswersFirstAndOnChangeOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	prom := newFakePrometheus()
	prom.set("team-a", "HighErrors")
	w := NewWatcher(prom, Settings{Interval: 30 * time.Second}, clk, nil, logr.Discard())
	startWatcher(t, w, clk)
	nn := types.NamespacedName{Namespace: "team-a", Name: "rbp"}
	if _, known := w.Check(nn); known {
		t.Fatal("known before any query")
	}
	if got := nextEvents(t, w, 1); got[0] != nn {
		t.Fatalf("event for %v", got)
	}
	a, known := w.Check(nn)
	if !known || a.Err != nil || fmt.Sprint(a.Firing) != "[HighErrors]" {
		t.Fatalf("%+v %v", a, known)
	}
	// A second namespace waited on, to see each round's queries.
	other := types.NamespacedName{Namespace: "team-b", Name: "rbp"}
	w.Check(other)
	nextEvents(t, w, 1)
	// The same answer on the next round: nothing to announce; then
	// cleared: announced, once.
	tick(t, clk)
	waitFor(t, func() bool { return prom.count("team-a") == 2 && prom.count("team-b") == 2 })
	prom.set("team-a")
	tick(t, clk)
	if got := nextEvents(t, w, 1); got[0] != nn {
		t.Fatalf("event for %v", got)
	}
	if a, _ := w.Check(nn); len(a.Firing) != 0 {
		t.Fatalf("still firing: %v", a.Firing)
	}
	noEvent(t, w)
	// Dropped: no more queries for the namespace.
	w.Drop(nn)
	tick(t, clk)
	waitFor(t, func() bool { return prom.count("team-b") == 4 })
	if got := prom.count("team-a"); got != 3 {
		t.Errorf("%d queries for team-a: asked for a namespace nobody waits on", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("condition not met")
		default:
			waitABit()
		}
	}
}

// TestWatcherCostIsPerNamespaceNotPerPolicy: 3,000 policies in three
// namespaces cost three queries a round, at most Parallel at once.
func TestWatcherCostIsPerNamespaceNotPerPolicy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	prom := newFakePrometheus()
	prom.gate = make(chan struct{})
	obs := &countingObserver{outcomes: map[string]int{}}
	w := NewWatcher(prom, Settings{Interval: 30 * time.Second, Parallel: 2}, clk, obs, logr.Discard())
	nss := []string{"a", "b", "c"}
	for i := range 3000 {
		w.Check(types.NamespacedName{Namespace: nss[i%3], Name: fmt.Sprintf("p%d", i)})
	}
	startWatcher(t, w, clk)
	waitFor(t, func() bool { prom.mu.Lock(); defer prom.mu.Unlock(); return prom.inFlight == 2 })
	close(prom.gate)
	nextEvents(t, w, 3000)
	if got := prom.total(); got != 3 {
		t.Errorf("%d queries for 3 namespaces", got)
	}
	if prom.maxSeen > 2 {
		t.Errorf("%d queries at once, Parallel is 2", prom.maxSeen)
	}
	tick(t, clk)
	waitFor(t, func() bool { return obs.get("answered") == 6 })
	if got := prom.total(); got != 6 {
		t.Errorf("%d queries after a round", got)
	}
}

// TestWatcherUnreachablePrometheusCostsOneQueryARound: the first
// unreachable answer answers the rest of the round; every policy gets an
// error (its restarts wait), and a stale answer is an error too.
func TestWatcherUnreachablePrometheusCostsOneQueryARound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	prom := newFakePrometheus()
	prom.err = unreachable("Prometheus did not answer within 10s")
	obs := &countingObserver{outcomes: map[string]int{}}
	w := NewWatcher(prom, Settings{Interval: 30 * time.Second, Parallel: 1}, clk, obs, logr.Discard())
	for i := range 50 {
		w.Check(types.NamespacedName{Namespace: fmt.Sprintf("ns-%02d", i), Name: "rbp"})
	}
	startWatcher(t, w, clk)
	nextEvents(t, w, 50)
	if got := prom.total(); got != 1 {
		t.Errorf("%d queries of an unreachable Prometheus in one round", got)
	}
	if obs.get("skipped") != 49 || obs.get("unreachable") != 1 {
		t.Errorf("outcomes %v", obs.outcomes)
	}
	for i := range 50 {
		a, known := w.Check(types.NamespacedName{Namespace: fmt.Sprintf("ns-%02d", i), Name: "rbp"})
		if !known || a.Err == nil {
			t.Fatalf("ns-%02d: %+v", i, a)
		}
	}
}

func TestWatcherStaleAnswerIsAnError(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	w := NewWatcher(newFakePrometheus(), Settings{Interval: 30 * time.Second}, clk, nil, logr.Discard())
	nn := types.NamespacedName{Namespace: "a", Name: "rbp"}
	w.Check(nn)
	w.store([]string{"a"}, []Answer{{At: clk.Now()}})
	if a, known := w.Check(nn); !known || a.Err != nil {
		t.Fatalf("%+v", a)
	}
	// No round for longer than three intervals (the watcher is stuck).
	clk.Step(91 * time.Second)
	if a, known := w.Check(nn); !known || a.Err == nil {
		t.Fatalf("a stale answer was trusted: %+v", a)
	}
}

// TestWatcherAsksAfreshForANamespaceNobodyWaitedOn: an answer kept from
// before, not renewed since (nobody waited), is not trusted past one
// interval: the next policy waits for a new one.
func TestWatcherAsksAfreshForANamespaceNobodyWaitedOn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	w := NewWatcher(newFakePrometheus(), Settings{Interval: 30 * time.Second}, clk, nil, logr.Discard())
	nn := types.NamespacedName{Namespace: "a", Name: "rbp"}
	w.Check(nn)
	w.store([]string{"a"}, []Answer{{At: clk.Now()}})
	w.Drop(nn)
	clk.Step(20 * time.Second)
	if _, known := w.Check(nn); !known {
		t.Fatal("an answer within the interval was not used")
	}
	w.Drop(nn)
	clk.Step(20 * time.Second)
	if _, known := w.Check(nn); known {
		t.Fatal("an answer not renewed for longer than the interval was used")
	}
}
