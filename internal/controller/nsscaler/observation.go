package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/savings"
)

// observation is what one reconcile saw and did, for the status: the scope
// of one reconcile.
type observation struct {
	// events are the reconcile's events, recorded once when it ends (after
	// the status write); nil drops them.
	events *status.Batch
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

	// saved is, per namespace, what the workloads held parked do not run.
	saved map[string]savings.Rate
	// savingsBlind: Deployments or StatefulSets could not be listed, so
	// saved is incomplete and the recorded rates are kept as they are.
	savingsBlind bool

	// selfService is what this reconcile decided about WakeRequests (nil:
	// nothing, the status keeps what it had).
	selfService *selfServicePass
	// gitOps is what the GitOps pass saw and did (spec.gitOps).
	gitOps gitOpsObservation
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
	if k == kindDeployment || k == kindStatefulSet {
		o.savingsBlind = true
	}
	if k.Group == "" || (o.previouslyParked.Has(k) && !meta.IsNoMatchError(err)) {
		o.unrestorable++
		o.carried = append(o.carried, k)
	}
}

// everythingRestored: no write failed and no kind may hide a parked object,
// so a departing NSScaler can be released.
func (o *observation) everythingRestored() bool {
	return len(o.workloadErrs) == 0 && o.unrestorable == 0 && len(o.gitOps.errs) == 0
}

// result is how the reconcile ends once the status is written: failed
// writes are retried with backoff (the status already says what failed), an
// unavailable kind after kindRetryAfter.
func (o *observation) result() (ctrl.Result, error) {
	if len(o.workloadErrs) > 0 {
		return ctrl.Result{}, fmt.Errorf("%d workloads failed: %w", len(o.workloadErrs), errors.Join(o.workloadErrs...))
	}
	if len(o.gitOps.errs) > 0 {
		return ctrl.Result{}, fmt.Errorf("%d GitOps objects failed: %w", len(o.gitOps.errs), errors.Join(o.gitOps.errs...))
	}
	if len(o.kindErrs) > 0 || len(o.gitOps.missing) > 0 {
		return ctrl.Result{RequeueAfter: kindRetryAfter}, nil
	}
	return ctrl.Result{}, nil
}

// countPods counts the pods (from the metadata cache) in parked namespaces.
func (r *Reconciler) countPods(ctx context.Context, _ *scalingv1alpha1.NSScaler, obs *observation) error {
	for _, ns := range sets.List(obs.plan.Parked) {
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.cache.List(ctx, pods, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		obs.podsRemaining += int32(len(pods.Items))
	}
	return nil
}
