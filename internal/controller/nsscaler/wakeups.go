package nsscaler

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// wakeups reconciles an NSScaler at the next instant its state changes by
// itself (a schedule transition, a wake entry or an exclusion ending, a
// back-off ending) and at no other time: there is no periodic resync. The
// timers run on the injected clock, so a test that steps a fake clock past
// a transition sees the reconcile it causes.
type wakeups struct {
	clock clock.WithDelayedExecution
	// events feed the controller's channel source.
	events chan event.GenericEvent
	// stop is closed when the manager stops: pending sends give up.
	stop chan struct{}

	mu     sync.Mutex
	timers map[string]wakeup
}

type wakeup struct {
	at    time.Time
	timer clock.Timer
}

func newWakeups(c clock.WithDelayedExecution) *wakeups {
	return &wakeups{clock: c, events: make(chan event.GenericEvent, 64), stop: make(chan struct{}), timers: map[string]wakeup{}}
}

// source is the controller's source of these reconciles.
func (w *wakeups) source() source.Source {
	return source.Channel(w.events, &handler.EnqueueRequestForObject{})
}

// Start implements manager.Runnable: it only waits for the manager to stop.
func (w *wakeups) Start(ctx context.Context) error {
	<-ctx.Done()
	close(w.stop)
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, t := range w.timers {
		t.timer.Stop()
		delete(w.timers, name)
	}
	return nil
}

// NeedLeaderElection is false: every replica closes stop when it shuts
// down (only the leader's timers are ever set).
func (w *wakeups) NeedLeaderElection() bool { return false }

// set arranges one reconcile of the NSScaler at `at`, replacing an earlier
// arrangement; a zero `at` cancels it.
func (w *wakeups) set(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.timers[name]
	if ok && old.at.Equal(at) {
		return
	}
	if ok {
		old.timer.Stop()
		delete(w.timers, name)
	}
	if at.IsZero() {
		return
	}
	d := at.Sub(w.clock.Now())
	w.timers[name] = wakeup{at: at, timer: w.clock.AfterFunc(max(d, 0), func() { w.fire(name, at) })}
}

// fire queues the reconcile, unless the arrangement changed meanwhile.
func (w *wakeups) fire(name string, at time.Time) {
	w.mu.Lock()
	if t, ok := w.timers[name]; !ok || !t.at.Equal(at) {
		w.mu.Unlock()
		return
	}
	delete(w.timers, name)
	w.mu.Unlock()
	w.now(name)
}

// now queues a reconcile of the NSScaler at once.
func (w *wakeups) now(name string) {
	s := &scalingv1alpha1.NSScaler{}
	s.Name = name
	select {
	case w.events <- event.GenericEvent{Object: s}:
	case <-w.stop:
	}
}

// nudge queues a reconcile if the queue has room, without waiting: for
// callers on informer goroutines, which must never block (on a replica that
// is not the leader nothing drains the channel; the leader reconciles every
// NSScaler when it starts anyway).
func (w *wakeups) nudge(name string) {
	s := &scalingv1alpha1.NSScaler{}
	s.Name = name
	select {
	case w.events <- event.GenericEvent{Object: s}:
	default:
	}
}

// pending is the instant a reconcile of the NSScaler is arranged for (zero:
// none), for tests.
func (w *wakeups) pending(name string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timers[name].at
}
