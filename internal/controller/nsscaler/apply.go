package nsscaler

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
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

// outcome is what happened to one job.
type outcome struct {
	job
	done Action // the action actually written (none if nothing was needed)
	err  error
}

// namespaceTally counts the writes in one namespace, for its events.
type namespaceTally struct {
	parked, restored, failed int
	firstErr                 error
}

// reconcileWorkloads decides on every workload of every handled kind and,
// when act is true, writes the decisions with bounded concurrency. One
// failing workload never stops the others: failures are collected in obs.
func (r *Reconciler) reconcileWorkloads(ctx context.Context, scaler *scalingv1alpha1.NSScaler, handlers []kindHandler,
	plan Plan, kinds sets.Set[KindKey], act bool, obs *observation) error {
	var jobs []job
	parkedKinds := sets.New[KindKey]()
	for _, h := range handlers {
		ws, err := h.list(ctx)
		if err != nil {
			// One kind that cannot be listed does not stop the others.
			obs.kindUnhandled(h.key(), err)
			continue
		}
		seen := make(map[types.UID]struct{}, len(ws))
		for _, cached := range ws {
			seen[cached.UID] = struct{}{}
			w := r.tracker.freshest(cached)
			if plan.Parked.Has(w.Namespace) && kinds.Has(w.Kind) && w.Controlled {
				obs.controlled++
			}
			d, err := Decide(w, plan, kinds, scaler.Name)
			if err != nil {
				if plan.Owns(w.Namespace) {
					obs.invalid = append(obs.invalid, fmt.Errorf("%s: %w", workloadRef(w), err))
				}
				continue
			}
			if d.Action == ActionNone || !act {
				r.count(w, d, d.Action == ActionNone, parkedKinds, obs)
				continue
			}
			jobs = append(jobs, job{h: h, w: w, d: d})
		}
		r.tracker.forget(h.key(), seen)
	}

	outcomes := r.runJobs(ctx, scaler.Name, plan, kinds, jobs)
	tallies := map[string]*namespaceTally{}
	tally := func(ns string) *namespaceTally {
		if tallies[ns] == nil {
			tallies[ns] = &namespaceTally{}
		}
		return tallies[ns]
	}
	for _, o := range outcomes {
		t := tally(o.w.Namespace)
		switch {
		case o.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = o.err
			}
			obs.workloadErrs = append(obs.workloadErrs, o.err)
			r.count(o.w, o.d, false, parkedKinds, obs)
		case o.done == ActionPark:
			t.parked++
			r.count(o.w, o.d, true, parkedKinds, obs)
		case o.done == ActionRestore:
			t.restored++
		default:
			r.count(o.w, o.d, true, parkedKinds, obs)
		}
	}
	r.emitNamespaceEvents(scaler, tallies)
	for _, k := range obs.carried {
		if k.Group != "" {
			parkedKinds.Insert(k)
		}
	}
	for k := range parkedKinds {
		obs.parkedKinds = append(obs.parkedKinds, scalingv1alpha1.WorkloadKind{Group: k.Group, Kind: k.Kind})
	}
	sort.Slice(obs.parkedKinds, func(i, j int) bool {
		a, b := obs.parkedKinds[i], obs.parkedKinds[j]
		return a.Group+"/"+a.Kind < b.Group+"/"+b.Kind
	})
	return nil
}

// count adds a workload's final state to the status counters. settled is
// true when the workload is in the state its decision wants.
func (r *Reconciler) count(w Workload, d Decision, settled bool, parkedKinds sets.Set[KindKey], obs *observation) {
	if d.Target {
		if settled {
			obs.parkedWorkloads++
		} else {
			obs.pendingTargets++
		}
	}
	// A custom kind stays watched while it has objects this NSScaler holds
	// parked or still has to restore.
	if w.Kind.Group != "" && (d.Target || d.Action == ActionRestore) {
		parkedKinds.Insert(w.Kind)
	}
}

// runJobs writes the jobs, WriteConcurrency at a time, and measures the
// park and restore passes.
func (r *Reconciler) runJobs(ctx context.Context, self string, plan Plan, kinds sets.Set[KindKey], jobs []job) []outcome {
	if len(jobs) == 0 {
		return nil
	}
	start := r.Clock.Now()
	outcomes := make([]outcome, len(jobs))
	sem := make(chan struct{}, r.WriteConcurrency)
	var wg sync.WaitGroup
	for i := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			outcomes[i] = r.writeWorkload(ctx, self, plan, kinds, jobs[i])
		}(i)
	}
	wg.Wait()
	elapsed := r.Clock.Since(start).Seconds()
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
		r.Metrics.ParkDuration.WithLabelValues(self).Observe(elapsed)
	}
	if restored > 0 {
		r.Metrics.RestoreDuration.WithLabelValues(self).Observe(elapsed)
	}
	log.FromContext(ctx).Info("workloads written", "parked", parked, "restored", restored, "jobs", len(jobs), "seconds", elapsed)
	return outcomes
}

// writeWorkload performs one decision. On a 409 conflict it re-reads the
// workload from the apiserver, decides again on the fresh state (so an
// original recorded meanwhile is never overwritten) and retries.
func (r *Reconciler) writeWorkload(ctx context.Context, self string, plan Plan, kinds sets.Set[KindKey], j job) outcome {
	w, d := j.w, j.d
	for attempt := 0; ; attempt++ {
		var written Workload
		var err error
		switch d.Action {
		case ActionPark:
			written, err = r.parkWorkload(ctx, j.h, w, d)
		case ActionRestore:
			written, err = r.restoreWorkload(ctx, j.h, w, d)
		default:
			return outcome{job: job{h: j.h, w: w, d: d}}
		}
		op := d.Action.String()
		switch {
		case err == nil:
			r.Metrics.Writes.WithLabelValues(self, op, "ok").Inc()
			r.tracker.record(written)
			return outcome{job: job{h: j.h, w: written, d: d}, done: d.Action}
		case apierrors.IsNotFound(err):
			return outcome{job: job{h: j.h, w: w, d: Decision{}}}
		case !apierrors.IsConflict(err) || attempt >= maxConflictRetries:
			r.Metrics.Writes.WithLabelValues(self, op, "error").Inc()
			return outcome{job: job{h: j.h, w: w, d: d}, err: fmt.Errorf("%s %s: %w", op, workloadRef(w), err)}
		}
		r.Metrics.Writes.WithLabelValues(self, op, "conflict").Inc()
		fresh, found, gerr := j.h.get(ctx, w.Namespace, w.Name)
		if gerr != nil {
			return outcome{job: job{h: j.h, w: w, d: d}, err: gerr}
		}
		if !found {
			return outcome{job: job{h: j.h, w: w, d: Decision{}}}
		}
		w = fresh
		if d, err = Decide(w, plan, kinds, self); err != nil {
			return outcome{job: job{h: j.h, w: w, d: d}, err: fmt.Errorf("%s: %w", workloadRef(w), err)}
		}
	}
}

// maxNamespaceEvents bounds the events of one reconcile per reason: one per
// namespace up to this many, then a single summary. Each event is an
// apiserver write; parking 500 namespaces records 11 per reason, not 500
// (which the event sink would still be sending a minute later).
const maxNamespaceEvents = 10

func (r *Reconciler) emitNamespaceEvents(scaler *scalingv1alpha1.NSScaler, tallies map[string]*namespaceTally) {
	names := make([]string, 0, len(tallies))
	for ns := range tallies {
		names = append(names, ns)
	}
	sort.Strings(names)
	r.emitPerNamespace(scaler, names, tallies, corev1.EventTypeNormal, "NamespaceParked", "Park",
		func(t *namespaceTally) int { return t.parked },
		func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("parked %d workloads in namespace %s", t.parked, ns)
		}, "parked %d workloads in %d more namespaces")
	r.emitPerNamespace(scaler, names, tallies, corev1.EventTypeNormal, "NamespaceRestored", "Restore",
		func(t *namespaceTally) int { return t.restored },
		func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("restored %d workloads in namespace %s to their recorded originals", t.restored, ns)
		}, "restored %d workloads in %d more namespaces to their recorded originals")
	r.emitPerNamespace(scaler, names, tallies, corev1.EventTypeWarning, "WorkloadsFailed", "Reconcile",
		func(t *namespaceTally) int { return t.failed },
		func(ns string, t *namespaceTally) string {
			return fmt.Sprintf("%d workloads in namespace %s failed, first: %v", t.failed, ns, t.firstErr)
		}, "%d workloads in %d more namespaces failed")
}

// emitPerNamespace records one event per namespace with a non-zero count,
// at most maxNamespaceEvents, and a summary (workloads, namespaces) for the
// rest.
func (r *Reconciler) emitPerNamespace(scaler *scalingv1alpha1.NSScaler, names []string, tallies map[string]*namespaceTally,
	eventType, reason, action string, count func(*namespaceTally) int, one func(string, *namespaceTally) string, rest string) {
	emitted, moreNamespaces, moreWorkloads := 0, 0, 0
	for _, ns := range names {
		t := tallies[ns]
		n := count(t)
		if n == 0 {
			continue
		}
		if emitted < maxNamespaceEvents {
			related := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			r.Recorder.Eventf(scaler, related, eventType, reason, action, "%s", one(ns, t))
			emitted++
			continue
		}
		moreNamespaces++
		moreWorkloads += n
	}
	if moreNamespaces > 0 {
		r.Recorder.Eventf(scaler, nil, eventType, reason, action, rest, moreWorkloads, moreNamespaces)
	}
}
