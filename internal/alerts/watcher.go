package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Querier answers which alerts fire for a namespace (Client).
type Querier interface {
	Firing(ctx context.Context, ns string) ([]string, error)
}

// Observer counts queries by outcome (answered, unreachable, invalid,
// skipped) and their duration; nil counts nothing.
type Observer interface {
	AlertQuery(outcome string, d time.Duration)
}

// Answer is what Prometheus last said about a namespace.
type Answer struct {
	// Firing: the names of the alerts firing there, sorted.
	Firing []string
	// Err: Prometheus could not tell (the restarts must wait).
	Err error
	// At is when it was asked.
	At time.Time
}

// Watcher keeps the answers for the namespaces of the RebootPolicies that
// wait on them. Its cost does not grow with the policies: one query per
// namespace per interval, at most Parallel at once, only while a policy
// there has a restart to make. A policy asks with Check (never blocking on
// Prometheus) and is sent on Events when its namespace's answer changes.
type Watcher struct {
	q        Querier
	clock    clock.Clock
	interval time.Duration
	stale    time.Duration
	parallel int
	obs      Observer
	log      logr.Logger

	mu     sync.Mutex
	spaces map[string]*space
	wake   chan struct{}
	events chan event.TypedGenericEvent[types.NamespacedName]
}

type space struct {
	answer  Answer
	known   bool
	waiters map[types.NamespacedName]struct{}
}

// NewWatcher builds a watcher asking q; Start runs it (a manager runnable).
func NewWatcher(q Querier, s Settings, clk clock.Clock, obs Observer, log logr.Logger) *Watcher {
	s = s.withDefaults()
	return &Watcher{
		q: q, clock: clk, interval: s.Interval, parallel: s.Parallel, obs: obs, log: log,
		// Three rounds without an answer: something is stuck (a round of
		// slow answers); Prometheus's last word is too old to act on.
		stale:  3 * s.Interval,
		spaces: map[string]*space{},
		wake:   make(chan struct{}, 1),
		events: make(chan event.TypedGenericEvent[types.NamespacedName], 1024),
	}
}

// Events sends the RebootPolicies whose namespace's answer changed.
func (w *Watcher) Events() <-chan event.TypedGenericEvent[types.NamespacedName] { return w.events }

// Check returns the answer for nn's namespace and keeps it renewed for nn
// until Drop. known is false until the first answer, which is asked for at
// once and announced on Events.
func (w *Watcher) Check(nn types.NamespacedName) (a Answer, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.spaces[nn.Namespace]
	if s == nil {
		s = &space{waiters: map[types.NamespacedName]struct{}{}}
		w.spaces[nn.Namespace] = s
	}
	// Only a namespace waited on is renewed every round; an older answer
	// of one nobody waited on may miss an alert that started since.
	renewed := len(s.waiters) > 0
	s.waiters[nn] = struct{}{}
	if s.known && !renewed && w.clock.Since(s.answer.At) > w.interval {
		s.known = false
	}
	if !s.known {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return Answer{}, false
	}
	a = s.answer
	if w.clock.Since(a.At) > w.stale {
		a = Answer{Err: fmt.Errorf("no answer from Prometheus for more than %s", w.stale), At: a.At}
	}
	return a, true
}

// Drop stops renewing the answer for nn (nothing of it waits, or it is
// gone).
func (w *Watcher) Drop(nn types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.spaces[nn.Namespace]; s != nil {
		delete(s.waiters, nn)
	}
}

// Start asks every interval for the namespaces waited on, and at once for
// a namespace asked about for the first time.
func (w *Watcher) Start(ctx context.Context) error {
	timer := w.clock.NewTimer(w.interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			w.round(ctx, true)
			timer.Reset(w.interval)
		case <-w.wake:
			w.round(ctx, false)
		}
	}
}

// round asks for the namespaces waited on (all, or those without an
// answer yet). Once Prometheus is found unreachable, the rest of the
// round gets that answer without asking: an unreachable Prometheus costs
// one timeout per round, not one per namespace.
func (w *Watcher) round(ctx context.Context, all bool) {
	due := w.due(all)
	if len(due) == 0 {
		return
	}
	answers := make([]Answer, len(due))
	var down error
	var downMu sync.Mutex
	sem := make(chan struct{}, w.parallel)
	var wg sync.WaitGroup
	for i, ns := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			downMu.Lock()
			skip := down
			downMu.Unlock()
			if skip != nil {
				answers[i] = Answer{Err: skip, At: w.clock.Now()}
				w.observe("skipped", 0)
				return
			}
			start := w.clock.Now()
			firing, err := w.q.Firing(ctx, ns)
			// Sorted and unique, whatever the querier: callers search it.
			slices.Sort(firing)
			firing = slices.Compact(firing)
			answers[i] = Answer{Firing: firing, Err: err, At: start}
			var e *Error
			switch {
			case err == nil:
				w.observe("answered", w.clock.Since(start))
			case errors.As(err, &e) && !e.Unreachable:
				w.observe("invalid", w.clock.Since(start))
			default:
				w.observe("unreachable", w.clock.Since(start))
				downMu.Lock()
				down = err
				downMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	for _, nn := range w.store(due, answers) {
		select {
		case w.events <- event.TypedGenericEvent[types.NamespacedName]{Object: nn}:
		case <-ctx.Done():
			return
		}
	}
}

// due lists the namespaces to ask for, and forgets those nobody has
// waited on for a while.
func (w *Watcher) due(all bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var due []string
	for ns, s := range w.spaces {
		switch {
		case len(s.waiters) == 0 && (!s.known || w.clock.Since(s.answer.At) > w.stale):
			delete(w.spaces, ns)
		case len(s.waiters) > 0 && (all || !s.known):
			due = append(due, ns)
		}
	}
	slices.Sort(due)
	return due
}

// store records the answers and returns the waiters of the namespaces
// whose answer changed.
func (w *Watcher) store(due []string, answers []Answer) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	var notify []types.NamespacedName
	for i, ns := range due {
		s := w.spaces[ns]
		if s == nil {
			continue
		}
		a := answers[i]
		changed := !s.known || !sameAnswer(s.answer, a)
		if changed && a.Err != nil && (!s.known || s.answer.Err == nil) {
			w.log.Info("Prometheus could not tell which alerts fire: the restarts of the namespace's RebootPolicies with blockingAlerts wait",
				"namespace", ns, "error", a.Err.Error())
		}
		s.answer, s.known = a, true
		if changed {
			for nn := range s.waiters {
				notify = append(notify, nn)
			}
		}
	}
	return notify
}

func sameAnswer(a, b Answer) bool {
	if (a.Err == nil) != (b.Err == nil) {
		return false
	}
	if a.Err != nil {
		return a.Err.Error() == b.Err.Error()
	}
	return slices.Equal(a.Firing, b.Firing)
}

func (w *Watcher) observe(outcome string, d time.Duration) {
	if w.obs != nil {
		w.obs.AlertQuery(outcome, d)
	}
}
