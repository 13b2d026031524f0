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

// outcome is what happened to one job.
type outcome struct {
	job
	done Action // the action actually written (none if nothing was needed)
	err  error
}

// reconcileWorkloads decides on every workload of every handled kind and,
// when act is true, writes the decisions with bounded concurrency. One
// failing workload never stops the others: failures are collected in obs.
func (r *Reconciler) reconcileWorkloads(ctx context.Context, scaler *scalingv1alpha1.NSScaler, handlers []kindHandler, p *workloadPass) {
	obs := p.obs
	jobs := r.decideAll(ctx, scaler, p, handlers)
	outcomes := r.runJobs(ctx, p, jobs)
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

// decideAll lists every kind and decides on each workload: what needs a
// write becomes a job, the rest is counted at once. One kind that cannot
// be listed does not stop the others.
func (r *Reconciler) decideAll(ctx context.Context, scaler *scalingv1alpha1.NSScaler, p *workloadPass, handlers []kindHandler) []job {
	lists := r.listAll(ctx, p, handlers)
	p.crossReference(lists, handlers)
	var jobs []job
	for i, h := range handlers {
		for _, w := range lists[i] {
			if p.contested(ctx, r, scaler, h, w) {
				continue
			}
			if j, write := p.decide(h, w); write {
				jobs = append(jobs, j)
			}
		}
	}
	return jobs
}

// listAll lists every handled kind (each workload as the controller last
// knows it: the cached copy or its own newer write).
func (r *Reconciler) listAll(ctx context.Context, p *workloadPass, handlers []kindHandler) [][]Workload {
	lists := make([][]Workload, len(handlers))
	for i, h := range handlers {
		ws, err := h.list(ctx)
		if err != nil {
			p.obs.kindUnhandled(h.key(), err)
			continue
		}
		seen := make(map[types.UID]struct{}, len(ws))
		for j := range ws {
			seen[ws[j].UID] = struct{}{}
			ws[j] = r.tracker.freshest(ws[j])
		}
		r.tracker.forget(h.key(), seen)
		lists[i] = ws
	}
	return lists
}

// crossReference sets what a workload's decision needs beyond the workload
// itself: whether an exclusion applies, whether a ScaledObject autoscales
// it (it is then parked through the ScaledObject), and — for a
// ScaledObject — whether the workload it scales is excluded. Only
// workloads in namespaces this NSScaler owns are evaluated.
func (p *workloadPass) crossReference(lists [][]Workload, handlers []kindHandler) {
	var scaledObjects []Workload
	for i, h := range handlers {
		if h.key() == kindScaledObject {
			scaledObjects = lists[i]
		}
	}
	autoscaled := scaledObjectTargets(scaledObjects)
	excluded := map[targetRef]struct{}{}
	for i := range lists {
		for j := range lists[i] {
			w := &lists[i][j]
			if !p.plan.Owns(w.Namespace) {
				continue
			}
			_, w.Autoscaled = autoscaled[refOf(*w)]
			if p.exclude(w) {
				excluded[refOf(*w)] = struct{}{}
			}
		}
	}
	for i, h := range handlers {
		if h.key() != kindScaledObject {
			continue
		}
		for j := range lists[i] {
			so := &lists[i][j]
			if _, ok := excluded[targetRef{kind: so.Target, namespace: so.Namespace, name: so.TargetName}]; ok {
				so.Excluded = true
			}
		}
	}
}

// exclude evaluates a workload's exclusion and reports it: a malformed
// annotation (InvalidAnnotation), the end of a time-bounded one (a
// wake-up), an excluded workload that would otherwise be parked (counted).
func (p *workloadPass) exclude(w *Workload) bool {
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
	return ex.excluded
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
	if d.Target {
		if settled {
			p.obs.parkedWorkloads++
		} else {
			p.obs.pendingTargets++
		}
	}
	// A custom kind stays watched while it has objects this NSScaler holds
	// parked or still has to restore.
	if w.Kind.Group != "" && (d.Target || d.Action == ActionRestore) {
		p.parkedKinds.Insert(w.Kind)
	}
}

// tally counts the written jobs into the status and, per namespace, for its
// events.
func (p *workloadPass) tally(outcomes []outcome) map[string]*namespaceTally {
	tallies := map[string]*namespaceTally{}
	for _, o := range outcomes {
		t := tallies[o.w.Namespace]
		if t == nil {
			t = &namespaceTally{}
			tallies[o.w.Namespace] = t
		}
		switch {
		case o.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = o.err
			}
			p.obs.workloadErrs = append(p.obs.workloadErrs, o.err)
			p.count(o.w, o.d, false)
		case o.done == ActionPark:
			t.parked++
			p.count(o.w, o.d, true)
		case o.done == ActionRestore:
			t.restored++
		default:
			p.count(o.w, o.d, true)
		}
	}
	return tallies
}

// runJobs writes the jobs, writeConcurrency at a time, and measures the
// park and restore passes.
func (r *Reconciler) runJobs(ctx context.Context, p *workloadPass, jobs []job) []outcome {
	if len(jobs) == 0 {
		return nil
	}
	start := r.clock.Now()
	outcomes := make([]outcome, len(jobs))
	sem := make(chan struct{}, r.writeConcurrency)
	var wg sync.WaitGroup
	for i := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[i] = r.writeWorkload(ctx, p, jobs[i])
		})
	}
	wg.Wait()
	r.observeWritePass(ctx, p.self, outcomes, r.clock.Since(start).Seconds())
	return outcomes
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
			return outcome{job: j}
		}
		op := j.d.Action.String()
		written, err := perform(ctx, j)
		switch {
		case err == nil:
			r.metrics.Writes.WithLabelValues(p.self, op, "ok").Inc()
			r.tracker.record(written)
			return outcome{job: job{h: j.h, w: written, d: j.d}, done: j.d.Action}
		case apierrors.IsNotFound(err):
			return outcome{job: job{h: j.h, w: j.w}}
		case !apierrors.IsConflict(err) || attempt >= maxConflictRetries:
			r.metrics.Writes.WithLabelValues(p.self, op, "error").Inc()
			return outcome{job: j, err: fmt.Errorf("%s %s: %w", op, workloadRef(j.w), err)}
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
		return j.h.park(ctx, j.w, j.d.Record)
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
		return j, &outcome{job: j, err: err}
	case !found:
		return j, &outcome{job: job{h: j.h, w: j.w}}
	}
	d, err := Decide(fresh, p.plan, p.kinds, p.self)
	next := job{h: j.h, w: fresh, d: d}
	if err != nil {
		return next, &outcome{job: next, err: fmt.Errorf("%s: %w", workloadRef(fresh), err)}
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
