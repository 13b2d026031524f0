package probe

import (
	"context"
	"math/bits"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// worker probes one policy on its period.
type worker struct {
	spec   WorkerSpec
	clock  clock.Clock
	log    logr.Logger
	cancel context.CancelFunc
	// results are the result and duration collectors of the trigger type.
	results TypeMetrics
	// phase is where in its period the worker probes, as a fraction of
	// the period (phaseOffset).
	phase float64

	mu       sync.Mutex
	state    *triggerState
	ackedSeq uint64
	// restartPending: status, as last written, holds a fire of this policy
	// whose restart is not done (see MarkPending).
	restartPending bool
	observed       uint64
}

func (wk *worker) view() WorkerView {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	st := wk.state.published
	return WorkerView{Hash: wk.spec.Hash, State: st, Unacked: st.FireSeq > wk.ackedSeq, AckedSeq: wk.ackedSeq, Observed: wk.observed}
}

// schedule returns the period, the timeout and the initial delay of the
// worker's trigger.
func (wk *worker) schedule() (period, timeout, initialDelay time.Duration) {
	t := wk.spec.Trigger
	switch {
	case t.Probe != nil:
		period = Seconds(t.Probe.PeriodSeconds, 10)
		timeout = Seconds(t.Probe.TimeoutSeconds, 1)
		initialDelay = Seconds(t.Probe.InitialDelaySeconds, 0)
	case t.SQL != nil:
		period = Seconds(t.SQL.PeriodSeconds, 30)
		timeout = Seconds(t.SQL.TimeoutSeconds, 5) + SQLClientGrace
	case t.Watch != nil:
		period = Seconds(t.Watch.PeriodSeconds, 10)
		timeout = 10 * time.Second
	case t.Referenced != nil:
		period = Seconds(t.Referenced.PeriodSeconds, 10)
		timeout = 30 * time.Second
	}
	if timeout > period {
		timeout = period
	}
	return period, timeout, initialDelay
}

// Seconds is v seconds, or def seconds when v is not positive.
func Seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func (wk *worker) run(ctx context.Context, w *Workers) {
	p, err := w.probers.NewProber(wk.spec.proberSpec())
	if err != nil {
		// A spec the reconciler let through but the prober refuses: publish
		// the error once, then wait for a new spec.
		wk.publish(ctx, w, Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError, Message: err.Error()})
		<-ctx.Done()
		return
	}
	defer p.Close()
	probe := timed(p.Probe)
	if dp, ok := p.(DeadlineProber); ok {
		probe = dp.ProbeWithin
	}
	period, timeout, initialDelay := wk.schedule()
	wp, wakeable := p.(WakeableProber)
	var wakeups <-chan struct{}
	var next time.Time
	if wakeable {
		// A watching prober records its first baselines within a second
		// (its period is only a resync).
		wakeups = wp.Wakeups()
		next = wk.clock.Now().Add(initialDelay + time.Duration(wk.phase*float64(min(period, time.Second))))
	} else {
		next = firstProbe(wk.clock.Now(), initialDelay, period, wk.phase)
	}
	timer := wk.clock.NewTimer(next.Sub(wk.clock.Now()))
	defer timer.Stop()
	drift := w.metrics.ForType(p.Kind())
	for {
		select {
		case <-ctx.Done():
			return
		case <-wakeups:
			// Something watched changed: act now, keep the schedule.
			wk.probeOnce(ctx, w, timeout, timed(wp.ProbeWoken))
			continue
		case <-timer.C():
		}
		start := wk.clock.Now()
		drift.ObserveDrift(start.Sub(next))
		if !wk.probeOnce(ctx, w, timeout, probe) {
			return
		}
		next = next.Add(period)
		now := wk.clock.Now()
		if !next.After(now) {
			// Missed one or more periods (slow probe): skip them, on the
			// grid so that the phase stays where phaseOffset put it.
			next = next.Add((now.Sub(next)/period + 1) * period)
		}
		timer.Reset(next.Sub(now))
	}
}

// probeOnce runs one check within timeout and publishes it; false when
// the worker is stopping.
func (wk *worker) probeOnce(ctx context.Context, w *Workers, timeout time.Duration, probe probeFunc) bool {
	start := wk.clock.Now()
	probe(ctx, timeout, func(obs Observation) {
		if ctx.Err() != nil {
			return
		}
		wk.results.Observe(obs.Result, wk.clock.Since(start))
		wk.publish(ctx, w, obs)
	})
	return ctx.Err() == nil
}

// probeFunc runs one check of at most timeout and reports it through
// report, once, before it returns; ctx is the worker's.
type probeFunc func(ctx context.Context, timeout time.Duration, report func(Observation))

// timed bounds a probe by a context that ends at the timeout.
func timed(probe func(context.Context) Observation) probeFunc {
	return func(ctx context.Context, timeout time.Duration, report func(Observation)) {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		report(probe(pctx))
	}
}

// publish feeds o to the trigger state and notifies on a transition.
func (wk *worker) publish(ctx context.Context, w *Workers, o Observation) {
	wk.mu.Lock()
	before := wk.state.published.FireSeq
	wk.state.merging = before > wk.ackedSeq || wk.restartPending
	changed := wk.state.observe(o, wk.clock.Now())
	fired := wk.state.published.FireSeq != before
	wk.mu.Unlock()
	if fired {
		w.metrics.TriggerFired(TriggerType(wk.spec.Trigger))
		wk.log.Info("trigger fired", "result", o.Result)
	}
	if changed {
		wk.log.V(1).Info("policy state changed", "result", o.Result, "reason", o.Reason)
		w.notify(ctx, wk.spec.Key.Object)
	}
	wk.mu.Lock()
	wk.observed++
	wk.mu.Unlock()
}

// phaseOffset is the start offset of the n-th worker of a period, as a
// fraction of the period: the van der Corput sequence (n's bits mirrored
// behind the binary point: 0, 1/2, 1/4, 3/4, 1/8, ...). Any run of
// consecutive workers is spread evenly over the period, so the workers of
// one RebootPolicy or namespace (declared one after another) probe a
// shared host one at a time instead of in clumps: random offsets put two
// of a namespace's 100 one-second probes within a millisecond of each
// other several times a second, and each such pair needs a second
// connection as soon as the host answers slowly.
func phaseOffset(n uint64) float64 {
	return float64(bits.Reverse64(n)) / (1 << 64)
}

// firstProbe is the first probe time of a worker whose phase is the
// fraction phase of period: the first point of its grid (multiples of
// period, plus the offset) after now and the initial delay. Workers of
// one period share the grid, so their offsets stay spread however late
// each one started, and the next probe is never due at once.
func firstProbe(now time.Time, initialDelay, period time.Duration, phase float64) time.Time {
	earliest := now.Add(initialDelay)
	t := earliest.Truncate(period).Add(time.Duration(phase * float64(period)))
	for !t.After(earliest) {
		t = t.Add(period)
	}
	return t
}

func (w *Workers) startLocked(s WorkerSpec) {
	wk := &worker{
		spec:  s,
		clock: w.clock,
		log:   w.log.WithValues("rebootpolicy", s.Key.Object.String(), "policy", s.Key.Policy),
		// Looked up once per worker, not once per period.
		results: w.metrics.ForType(TriggerType(s.Trigger)),
	}
	period, _, _ := wk.schedule()
	wk.phase = phaseOffset(w.phases[period])
	w.phases[period]++
	wk.state = newTriggerStateFor(s)
	w.workers[s.Key] = wk
	if w.byObj[s.Key.Object] == nil {
		w.byObj[s.Key.Object] = map[string]*worker{}
		ns := s.Key.Object.Namespace
		if w.byNS[ns] == nil {
			w.byNS[ns] = map[types.NamespacedName]struct{}{}
		}
		w.byNS[ns][s.Key.Object] = struct{}{}
	}
	w.byObj[s.Key.Object][s.Key.Policy] = wk
	if w.ctx != nil {
		w.launch(wk)
	}
}

func (w *Workers) stopLocked(wk *worker) {
	if wk.cancel != nil {
		wk.cancel()
	}
	delete(w.workers, wk.spec.Key)
	if m := w.byObj[wk.spec.Key.Object]; m != nil {
		delete(m, wk.spec.Key.Policy)
		if len(m) == 0 {
			delete(w.byObj, wk.spec.Key.Object)
			ns := wk.spec.Key.Object.Namespace
			delete(w.byNS[ns], wk.spec.Key.Object)
			if len(w.byNS[ns]) == 0 {
				delete(w.byNS, ns)
			}
		}
	}
}

// launch starts wk's goroutine; w.mu is held and w.ctx is set.
func (w *Workers) launch(wk *worker) {
	if w.ctx.Err() != nil {
		return // shutting down
	}
	ctx, cancel := context.WithCancel(w.ctx)
	wk.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		wk.run(ctx, w)
	}()
}

// notify tells the controller that obj has a transition. It blocks only
// the worker (never a reconcile) when the controller lags behind.
func (w *Workers) notify(ctx context.Context, obj types.NamespacedName) {
	select {
	case w.events <- event.TypedGenericEvent[types.NamespacedName]{Object: obj}:
	case <-ctx.Done():
	}
}

func newTriggerStateFor(s WorkerSpec) *triggerState {
	if p := s.Trigger.Probe; p != nil {
		return newTriggerState(thresholdTrigger, p.FailureThreshold, p.SuccessThreshold, PolicyState{TriggerHash: s.Hash})
	}
	baseline := PolicyState{TriggerHash: s.Hash}
	if s.Baseline.TriggerHash == s.Hash {
		baseline.Fingerprint = s.Baseline.Fingerprint
		baseline.LastResult = s.Baseline.LastResult
		baseline.Reason = s.Baseline.Reason
		baseline.Message = s.Baseline.Message
		baseline.Targets = s.Baseline.Targets
	}
	if s.Trigger.Referenced != nil {
		return newTriggerState(referencedTrigger, 1, 1, baseline)
	}
	return newTriggerState(changeTrigger, 1, 1, baseline)
}
