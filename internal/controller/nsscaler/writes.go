package nsscaler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// maxConflictRetries bounds the re-reads of one workload after 409 conflicts
// within a reconcile; the next reconcile starts over.
const maxConflictRetries = 5

// workloadPass is the workload half of one reconcile: what the NSScaler
// decides on, and what it saw.
type workloadPass struct {
	self  string
	plan  Plan
	kinds sets.Set[KindKey]
	// act is false while the NSScaler is suspended, in DryRun or has an
	// invalid schedule: decisions are counted, not written.
	act bool
	// dryRun counts what would be written (spec.mode DryRun).
	dryRun bool
	// now is the reconcile's instant (the injected clock).
	now time.Time
	// excludeSelector is spec.excludeSelector (nil: none).
	excludeSelector labels.Selector
	// grace is spec.gracePeriod (0: none).
	grace time.Duration
	// parkedReplicasChanged: spec.parkedReplicas differs from the last
	// pass's, so this pass's re-parks are not scale-ups by anyone else.
	parkedReplicasChanged bool
	// fights is this NSScaler's memory of contested workloads.
	fights *fightTracker
	obs    *observation
	// parkedKinds are the custom kinds with objects held parked or still to
	// restore.
	parkedKinds sets.Set[KindKey]
	// targets are the workloads that belong parked (their fights are kept).
	targets map[types.UID]struct{}
	// dryTallies count, per namespace, what a DryRun would write.
	dryTallies map[string]*namespaceTally
}

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
}

// outcomeOf is j's outcome: done written, or err.
func outcomeOf(j job, done Action, err error) outcome {
	return outcome{namespace: j.w.Namespace, kind: j.w.Kind, target: j.d.Target, action: j.d.Action, keep: j.d.Keep, done: done, err: err}
}

// reconcileWorkloads decides on every workload of every handled kind and,
// when act is true, writes the decisions with bounded concurrency. One
// failing workload never stops the others: failures are collected in obs.
func (r *Reconciler) reconcileWorkloads(ctx context.Context, scaler *scalingv1alpha1.NSScaler, handlers []kindHandler, p *workloadPass) {
	obs := p.obs
	writes := r.newWritePool(ctx, p)
	r.decideAll(ctx, scaler, p, handlers, writes.submit)
	outcomes := writes.wait()
	r.emitNamespaceEvents(scaler, p.tally(outcomes))
	r.emitDryRunEvents(scaler, p.dryTallies, obs.nextTransition)
	if p.act {
		p.fights.forget(p.targets)
	}
	for _, k := range obs.carried {
		if k.Group != "" {
			p.parkedKinds.Insert(k)
		}
	}
	obs.parkedKinds = workloadKinds(p.parkedKinds)
}

// decideAll decides on each workload of every handled kind: what needs a
// write becomes a job handed to write at once (the first writes are in
// flight while the later workloads are decided), the rest is counted. One
// kind that cannot be listed does not stop the others. Each cached object
// becomes a Workload only while it is decided: a pass that held them all
// until its end kept memory alive in proportion to the fleet, and the heap
// grows by half of what is live (test/bench/RESULTS.md).
func (r *Reconciler) decideAll(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *workloadPass, handlers []kindHandler, write func(job)) {
	refs := r.kedaReferences(ctx, p, handlers)
	for _, h := range handlers {
		decideOn := func(w Workload) {
			p.crossReference(&w, refs)
			if p.contested(ctx, r, scaler, h, w) {
				return
			}
			if j, needed := p.decide(h, w); needed {
				write(j)
			}
		}
		if h.key() != kindScaledObject {
			if err := r.eachFresh(ctx, h, decideOn); err != nil {
				p.obs.kindUnhandled(h.key(), err)
			}
			continue
		}
		if refs.err != nil {
			p.obs.kindUnhandled(h.key(), refs.err)
			continue
		}
		for _, so := range refs.scaledObjects {
			decideOn(so)
		}
	}
}

// kedaRefs is what ScaledObjects and the workloads they autoscale need to
// know of each other before either is decided.
type kedaRefs struct {
	// scaledObjects are every ScaledObject, listed first (they are few).
	scaledObjects []Workload
	err           error
	// autoscaled are the workloads a ScaledObject targets; excluded those
	// of them an exclusion applies to.
	autoscaled, excluded map[targetRef]struct{}
	// replicas are what the autoscaled workloads run (a ScaledObject is
	// paused at no more).
	replicas map[targetRef]int32
}

// kedaReferences lists the ScaledObjects and, when there are any, finds
// which of their targets are excluded (a ScaledObject whose workload is
// excluded is left alone too).
func (r *Reconciler) kedaReferences(ctx context.Context, p *workloadPass, handlers []kindHandler) *kedaRefs {
	refs := &kedaRefs{}
	for _, h := range handlers {
		if h.key() == kindScaledObject {
			refs.err = r.eachFresh(ctx, h, func(w Workload) { refs.scaledObjects = append(refs.scaledObjects, w) })
		}
	}
	refs.autoscaled = scaledObjectTargets(refs.scaledObjects)
	if len(refs.autoscaled) == 0 {
		return refs
	}
	refs.excluded = map[targetRef]struct{}{}
	refs.replicas = map[targetRef]int32{}
	for _, h := range handlers {
		if h.key() == kindScaledObject {
			continue
		}
		// A kind that cannot be listed is reported when it is decided on.
		_ = r.eachFresh(ctx, h, func(w Workload) {
			ref := refOf(w)
			if _, ok := refs.autoscaled[ref]; !ok || !p.plan.Owns(w.Namespace) {
				return
			}
			refs.replicas[ref] = w.Replicas
			if excludedBy(w, p.excludeSelector, p.now).excluded {
				refs.excluded[ref] = struct{}{}
			}
		})
	}
	return refs
}

// eachFresh calls fn with every workload of h, each as the controller last
// knows it (the cached copy or its own newer write), then forgets the
// tracked writes of objects that are gone. The watch drops most tracked
// writes as it sees them (notOwnWrite): only the objects with a write
// tracked when the pass began are looked up. Writes recorded while it runs
// (the pass's own) are kept.
func (r *Reconciler) eachFresh(ctx context.Context, h kindHandler, fn func(Workload)) error {
	gone := r.tracker.tracked(h.key())
	err := h.each(ctx, func(w Workload) {
		if _, tracked := gone[w.UID]; tracked {
			delete(gone, w.UID)
			w = r.freshOf(ctx, h, w)
		}
		fn(w)
	})
	if err == nil {
		r.tracker.forget(gone)
	}
	return err
}

// freshOf is w, listed when a write of the controller to it was not cached
// yet, as the controller knows it now. The pass decides at the pace of its
// writes, so the watch may deliver that write (and the tracker forget it)
// after w was listed: the cache then holds what w is missing.
func (r *Reconciler) freshOf(ctx context.Context, h kindHandler, w Workload) Workload {
	if fresh, known := r.tracker.freshest(w); known {
		return fresh
	}
	c, found, err := h.cached(ctx, w.Namespace, w.Name)
	if err != nil || !found || c.UID != w.UID {
		return w
	}
	return c
}

// crossReference sets what a workload's decision needs beyond the
// workload itself: whether an exclusion applies, whether a ScaledObject
// autoscales it (it is then parked through the ScaledObject), and — for a
// ScaledObject — whether the workload it scales is excluded. Only
// workloads in namespaces this NSScaler owns are evaluated.
func (p *workloadPass) crossReference(w *Workload, refs *kedaRefs) {
	if !p.plan.Owns(w.Namespace) {
		return
	}
	_, w.Autoscaled = refs.autoscaled[refOf(*w)]
	p.exclude(w)
	if w.Kind == kindScaledObject {
		target := targetRef{kind: w.Target, namespace: w.Namespace, name: w.TargetName}
		if _, ok := refs.excluded[target]; ok {
			w.Excluded = true
		}
		// A target that is not there runs nothing.
		w.Replicas = refs.replicas[target]
	}
	p.applyGrace(w)
}

// exclude evaluates a workload's exclusion and reports it: a malformed
// annotation (InvalidAnnotation), the end of a time-bounded one (a
// wake-up), an excluded workload that would otherwise be parked (counted).
func (p *workloadPass) exclude(w *Workload) {
	ex := excludedBy(*w, p.excludeSelector, p.now)
	if ex.err != nil {
		p.obs.invalid = append(p.obs.invalid, fmt.Errorf("%s: %w", workloadRef(*w), ex.err))
	}
	w.Excluded = ex.excluded
	p.obs.wakeAt(tenantWakeup(ex.until))
	p.obs.wakeAt(tenantWakeup(ex.validFrom))
	if ex.excluded && p.plan.Parked.Has(w.Namespace) && p.kinds.Has(w.parkKind()) && !w.Controlled {
		p.obs.excluded++
	}
}

// decide takes the decision on one workload; write is true when it needs a
// write (and the NSScaler acts).
func (p *workloadPass) decide(h kindHandler, w Workload) (j job, write bool) {
	if p.plan.Parked.Has(w.Namespace) && p.kinds.Has(w.Kind) && w.Controlled {
		p.obs.controlled++
	}
	d, err := Decide(w, p.plan, p.kinds, p.self)
	if err != nil {
		if p.plan.Owns(w.Namespace) {
			p.obs.invalid = append(p.obs.invalid, fmt.Errorf("%s: %w", workloadRef(w), err))
		}
		return job{}, false
	}
	if d.Target {
		p.targets[w.UID] = struct{}{}
	}
	if d.AtOrBelow {
		p.obs.atOrBelow++
		p.obs.keptPods += d.Keep
	}
	if d.Action == ActionNone || !p.act || (d.Action == ActionPark && p.obs.holdParks) {
		p.count(w, d, d.Action == ActionNone)
		if p.dryRun {
			p.countDryRun(w, d.Action)
		}
		return job{}, false
	}
	return job{h: h, w: w, d: d}, true
}

// countDryRun counts what a DryRun NSScaler would write.
func (p *workloadPass) countDryRun(w Workload, a Action) {
	if a == ActionNone {
		return
	}
	t := p.dryTallies[w.Namespace]
	if t == nil {
		t = &namespaceTally{}
		p.dryTallies[w.Namespace] = t
	}
	if a == ActionPark {
		p.obs.wouldPark++
		t.parked++
	} else {
		p.obs.wouldRestore++
		t.restored++
	}
}

// count adds a workload's final state to the status counters. settled is
// true when the workload is in the state its decision wants.
func (p *workloadPass) count(w Workload, d Decision, settled bool) {
	p.countFinal(w.Kind, d.Target, d.Action, settled, d.Keep)
}

// countFinal is count of a workload of kind whose decision was target and
// action; a settled target keeps keep replicas.
func (p *workloadPass) countFinal(kind KindKey, target bool, action Action, settled bool, keep int32) {
	if target {
		if settled {
			p.obs.parkedWorkloads++
			p.obs.keptPods += keep
		} else {
			p.obs.pendingTargets++
		}
	}
	// A custom kind stays watched while it has objects this NSScaler holds
	// parked or still has to restore.
	if kind.Group != "" && (target || action == ActionRestore) {
		p.parkedKinds.Insert(kind)
	}
}

// tally counts the written jobs into the status and, per namespace, for its
// events.
func (p *workloadPass) tally(outcomes []outcome) map[string]*namespaceTally {
	tallies := map[string]*namespaceTally{}
	for _, o := range outcomes {
		t := tallies[o.namespace]
		if t == nil {
			t = &namespaceTally{}
			tallies[o.namespace] = t
		}
		switch {
		case o.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = o.err
			}
			p.obs.workloadErrs = append(p.obs.workloadErrs, o.err)
			p.countFinal(o.kind, o.target, o.action, false, o.keep)
		case o.done == ActionPark:
			t.parked++
			p.countFinal(o.kind, o.target, o.action, true, o.keep)
		case o.done == ActionRestore:
			t.restored++
		default:
			p.countFinal(o.kind, o.target, o.action, true, o.keep)
		}
	}
	return tallies
}

// writePool writes one reconcile's jobs, writeConcurrency at a time, as
// they are decided. Its writers start with the first job: a reconcile with
// nothing to write starts none.
type writePool struct {
	ctx       context.Context
	r         *Reconciler
	p         *workloadPass
	jobs      chan job
	wg        sync.WaitGroup
	perWriter [][]outcome
	start     time.Time
	submitted int
}

func (r *Reconciler) newWritePool(ctx context.Context, p *workloadPass) *writePool {
	return &writePool{ctx: ctx, r: r, p: p}
}

// submit hands a job to the writers; it blocks while all of them are busy
// and the small queue is full, which paces the decisions to the writes.
func (wp *writePool) submit(j job) {
	if wp.jobs == nil {
		wp.startWriters()
	}
	wp.submitted++
	wp.jobs <- j
}

func (wp *writePool) startWriters() {
	n := wp.r.writeConcurrency
	wp.start = wp.r.clock.Now()
	wp.jobs = make(chan job, n)
	wp.perWriter = make([][]outcome, n)
	for i := range n {
		wp.wg.Go(func() {
			for j := range wp.jobs {
				wp.perWriter[i] = append(wp.perWriter[i], wp.r.writeWorkload(wp.ctx, wp.p, j))
			}
		})
	}
}

// wait waits for the submitted jobs, measures the pass, and returns their
// outcomes.
func (wp *writePool) wait() []outcome {
	if wp.jobs == nil {
		return nil
	}
	close(wp.jobs)
	wp.wg.Wait()
	outcomes := make([]outcome, 0, wp.submitted)
	for _, written := range wp.perWriter {
		outcomes = append(outcomes, written...)
	}
	wp.r.observeWritePass(wp.ctx, wp.p.self, outcomes, wp.r.clock.Since(wp.start).Seconds())
	return outcomes
}

// runJobs writes jobs through a write pool and returns their outcomes.
func (r *Reconciler) runJobs(ctx context.Context, p *workloadPass, jobs []job) []outcome {
	wp := r.newWritePool(ctx, p)
	for _, j := range jobs {
		wp.submit(j)
	}
	return wp.wait()
}

// observeWritePass records the duration of a park or restore pass.
func (r *Reconciler) observeWritePass(ctx context.Context, self string, outcomes []outcome, seconds float64) {
	var parked, restored int
	for _, o := range outcomes {
		switch o.done {
		case ActionPark:
			parked++
		case ActionRestore:
			restored++
		}
	}
	if parked > 0 {
		r.metrics.ParkDuration.WithLabelValues(self).Observe(seconds)
	}
	if restored > 0 {
		r.metrics.RestoreDuration.WithLabelValues(self).Observe(seconds)
	}
	log.FromContext(ctx).Info("workloads written", "parked", parked, "restored", restored, "jobs", len(outcomes), "seconds", seconds)
}

// writeWorkload performs one decision. On a 409 conflict it re-reads the
// workload from the apiserver, decides again on the fresh state (so an
// original recorded meanwhile is never overwritten) and retries.
func (r *Reconciler) writeWorkload(ctx context.Context, p *workloadPass, j job) outcome {
	for attempt := 0; ; attempt++ {
		if j.d.Action == ActionNone {
			return outcomeOf(j, ActionNone, nil)
		}
		op := j.d.Action.String()
		written, err := perform(ctx, j)
		switch {
		case err == nil:
			r.metrics.Writes.WithLabelValues(p.self, op, "ok").Inc()
			r.tracker.record(written)
			return outcomeOf(j, j.d.Action, nil)
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

// workloadKinds lists kinds as status.parkedKinds does: sorted by group,
// then kind.
func workloadKinds(kinds sets.Set[KindKey]) []scalingv1alpha1.WorkloadKind {
	var out []scalingv1alpha1.WorkloadKind
	for k := range kinds {
		out = append(out, scalingv1alpha1.WorkloadKind{Group: k.Group, Kind: k.Kind})
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.WorkloadKind) int {
		return cmp.Compare(a.Group+"/"+a.Kind, b.Group+"/"+b.Kind)
	})
	return out
}
