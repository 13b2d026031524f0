package nsscaler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runbook-dev/runbook/internal/savings"
)

// maxConflictRetries bounds the re-reads of one workload after 409 conflicts
// within a reconcile; the next reconcile starts over.
const maxConflictRetries = 5

// job is one workload to write.
type job struct {
	h kindHandler
	w Workload
	d Decision
}

// outcome is what happened to one job: only what the status, the events
// and the metrics count (a mass park keeps one per workload until the
// pass ends).
type outcome struct {
	namespace string
	kind      KindKey
	// target and action are the decision's.
	target bool
	action Action
	keep   int32
	done   Action // the action actually written (none if nothing was needed)
	err    error
	// saved is what the workload, held parked, does not run.
	saved savings.Rate
}

// outcomeOf is j's outcome: done written, or err.
func outcomeOf(j job, done Action, err error) outcome {
	return outcome{namespace: j.w.Namespace, kind: j.w.Kind, target: j.d.Target, action: j.d.Action, keep: j.d.Keep, done: done, err: err}
}

// writeWorkload performs one decision. On a 409 conflict it re-reads the
// workload from the apiserver, decides again on the fresh state (so an
// original recorded meanwhile is never overwritten) and retries.
func (r *Reconciler) writeWorkload(ctx context.Context, p *workloadPass, j job) outcome {
	for attempt := 0; ; attempt++ {
		if j.d.Action == ActionNone {
			o := outcomeOf(j, ActionNone, nil)
			o.saved = p.savedRate(j.w, j.d)
			return o
		}
		op := j.d.Action.String()
		written, err := perform(ctx, j)
		switch {
		case err == nil:
			r.metrics.Writes.WithLabelValues(p.self, op, "ok").Inc()
			r.tracker.record(written)
			o := outcomeOf(j, j.d.Action, nil)
			o.saved = p.savedRate(j.w, j.d)
			return o
		case apierrors.IsNotFound(err):
			return outcomeOf(job{h: j.h, w: j.w}, ActionNone, nil)
		case !apierrors.IsConflict(err) || attempt >= maxConflictRetries:
			r.metrics.Writes.WithLabelValues(p.self, op, "error").Inc()
			return outcomeOf(j, ActionNone, fmt.Errorf("%s %s: %w", op, workloadRef(j.w), err))
		}
		r.metrics.Writes.WithLabelValues(p.self, op, "conflict").Inc()
		var failed *outcome
		if j, failed = p.redecide(ctx, j); failed != nil {
			return *failed
		}
	}
}

// perform writes one decision with the workload's kind handler. A park
// records the original in the same write when the decision carries one; a
// workload that already carries an original is re-parked without touching
// it, so a second park never records zero as the original. A restore
// returns to the annotation's value, not a remembered one: a user who edits
// the annotation of a parked workload changes what it comes back to.
func perform(ctx context.Context, j job) (Workload, error) {
	switch j.d.Action {
	case ActionPark:
		return j.h.park(ctx, j.w, j.d.Record, j.d.ParkAt)
	case ActionRestore:
		return j.h.restore(ctx, j.w, j.d.Original)
	}
	return j.w, nil
}

// redecide re-reads a workload after a conflict and decides again; an
// outcome when there is nothing more to try (it is gone, unreadable or
// carries an annotation that cannot be read).
func (p *workloadPass) redecide(ctx context.Context, j job) (job, *outcome) {
	fresh, found, err := j.h.get(ctx, j.w.Namespace, j.w.Name)
	switch {
	case err != nil:
		o := outcomeOf(j, ActionNone, err)
		return j, &o
	case !found:
		o := outcomeOf(job{h: j.h, w: j.w}, ActionNone, nil)
		return j, &o
	}
	p.carryPassFacts(&fresh, j.w)
	d, err := Decide(fresh, p.plan, p.kinds, p.self)
	next := job{h: j.h, w: fresh, d: d}
	if err != nil {
		o := outcomeOf(next, ActionNone, fmt.Errorf("%s: %w", workloadRef(fresh), err))
		return next, &o
	}
	return next, nil
}
