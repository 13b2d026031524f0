package nsscaler

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

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

// reconcileWorkloads decides on every workload of every handled kind and,
// when act is true, writes the decisions with bounded concurrency. One
// failing workload never stops the others: failures are collected in obs.
func (r *Reconciler) reconcileWorkloads(ctx context.Context, scaler *scalingv1alpha1.NSScaler, handlers []kindHandler, p *workloadPass) {
	obs := p.obs
	writes := r.newWritePool(ctx, p)
	r.decideAll(ctx, scaler, p, handlers, writes.submit)
	outcomes := writes.wait()
	r.emitNamespaceEvents(scaler, obs.events, p.tally(outcomes))
	r.emitDryRunEvents(scaler, obs.events, p.dryTallies, obs.nextTransition)
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
