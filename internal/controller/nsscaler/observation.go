package nsscaler

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// observation is what one reconcile saw and did, for the status.
type observation struct {
	// generation, deleting and suspended describe the NSScaler the
	// reconcile acted on; the status reports them even when it is written
	// onto a fresher copy.
	generation int64
	deleting   bool
	suspended  bool
	dryRun     bool
	// now is the reconcile's instant; moment what time says then.
	now    time.Time
	moment moment
	// nextTransition is when what is parked next changes by itself.
	nextTransition time.Time
	// wakeup is the earliest instant the state changes by itself: the next
	// transition, a wake entry ending, an exclusion expiring, a back-off
	// ending. The controller reconciles then, and at no other time.
	wakeup time.Time

	plan            Plan
	planErr         error
	parkedWorkloads int32
	pendingTargets  int32
	controlled      int32
	podsRemaining   int32
	parkedKinds     []scalingv1alpha1.WorkloadKind
	kindErrs        []error
	// unrestorable counts kind errors that may hide parked objects (the kind
	// exists but cannot be handled): deletion waits for them, and such kinds
	// stay in status.parkedKinds (carried) so they are retried.
	unrestorable     int
	carried          []KindKey
	previouslyParked sets.Set[KindKey]
	workloadErrs     []error
	invalid          []error

	// holdParks: the ScaledObjects are not known yet (their cache is
	// syncing), so nothing is parked this time (restores go ahead).
	holdParks bool

	excluded       int32
	contested      []contestedWorkload
	newlyContested int
	wouldPark      int32
	wouldRestore   int32

	// atOrBelow counts the workloads of parked namespaces left as they are
	// at spec.parkedReplicas or fewer; keptPods are the pods the parked
	// workloads and those keep by design.
	atOrBelow int32
	keptPods  int32
	// grace counts, per namespace, the workloads younger than
	// spec.gracePeriod; workloadsInGrace all of them.
	grace            map[string]*graceTally
	workloadsInGrace int32
	// gracePeriod is spec.gracePeriod (0: none).
	gracePeriod time.Duration
}

// wakeAt makes the reconcile happen again at t at the latest.
func (o *observation) wakeAt(t time.Time) {
	if t.After(o.now) {
		o.wakeup = earliest(o.wakeup, t)
	}
}

func newObservation(scaler *scalingv1alpha1.NSScaler, now time.Time) *observation {
	return &observation{
		generation:  scaler.Generation,
		deleting:    !scaler.DeletionTimestamp.IsZero(),
		suspended:   scaler.Spec.Suspend,
		dryRun:      scaler.Spec.Mode == scalingv1alpha1.ModeDryRun,
		now:         now,
		moment:      momentAt(scaler.Spec, now),
		gracePeriod: gracePeriodOf(scaler.Spec.GracePeriod),
	}
}

// acts: workloads are written — unless suspended, in DryRun or with a
// schedule that cannot be read; a departing NSScaler always restores.
func (o *observation) acts() bool {
	return o.deleting || (!o.suspended && !o.dryRun && o.moment.err == nil)
}

// kindUnhandled records a kind that could not be handled this time. When
// this NSScaler had parked objects of it and the kind still exists, they may
// still need a restore: the kind stays in status.parkedKinds and deletion
// waits. A kind that is no longer served has no objects left.
func (o *observation) kindUnhandled(k KindKey, err error) {
	o.kindErrs = append(o.kindErrs, err)
	if k.Group == "" || (o.previouslyParked.Has(k) && !meta.IsNoMatchError(err)) {
		o.unrestorable++
		o.carried = append(o.carried, k)
	}
}

// everythingRestored: no write failed and no kind may hide a parked object,
// so a departing NSScaler can be released.
func (o *observation) everythingRestored() bool {
	return len(o.workloadErrs) == 0 && o.unrestorable == 0
}

// result is how the reconcile ends once the status is written: failed
// writes are retried with backoff (the status already says what failed), an
// unavailable kind after kindRetryAfter.
func (o *observation) result() (ctrl.Result, error) {
	if len(o.workloadErrs) > 0 {
		return ctrl.Result{}, fmt.Errorf("%d workloads failed: %w", len(o.workloadErrs), errors.Join(o.workloadErrs...))
	}
	if len(o.kindErrs) > 0 {
		return ctrl.Result{RequeueAfter: kindRetryAfter}, nil
	}
	return ctrl.Result{}, nil
}
