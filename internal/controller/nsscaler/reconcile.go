package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// kindRetryAfter is how soon a reconcile is retried while a custom-resource
// kind is not served (its CRD may be installed later; CRDs are not watched).
const kindRetryAfter = 30 * time.Second

// observation is what one reconcile saw and did, for the status.
type observation struct {
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
}

// Reconcile parks the targets of one NSScaler, restores what no longer
// belongs parked, and reports. It is idempotent and assumes nothing about
// earlier runs: the recorded originals on the workloads are the only memory.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var scaler scalingv1alpha1.NSScaler
	if err := r.Client.Get(ctx, req.NamespacedName, &scaler); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !scaler.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(&scaler, Finalizer) {
		return ctrl.Result{}, nil
	}
	if deleting && scaler.Spec.DeletionPolicy == scalingv1alpha1.DeletionPolicyKeep {
		logger.Info("deleted with deletionPolicy Keep: workloads stay parked")
		r.Metrics.forget(scaler.Name)
		return ctrl.Result{}, r.removeFinalizer(ctx, &scaler)
	}
	if !deleting && !controllerutil.ContainsFinalizer(&scaler, Finalizer) {
		if err := r.addFinalizer(ctx, &scaler); err != nil {
			return ctrl.Result{}, err
		}
	}

	obs := &observation{}
	plan, err := r.plan(ctx, &scaler)
	if err != nil {
		var invalid *invalidSelectorError
		if !errors.As(err, &invalid) {
			return ctrl.Result{}, err
		}
		obs.planErr = err // selects nothing; what it parked is restored
	}
	if deleting {
		plan = releaseAll(plan)
	}
	obs.plan = plan

	kinds := sets.New[KindKey]()
	for _, k := range scaler.Spec.Kinds {
		kinds.Insert(kindKeyOf(k))
	}
	handlers := r.handlers(ctx, &scaler, obs)
	act := !scaler.Spec.Suspend || deleting
	if err := r.reconcileWorkloads(ctx, &scaler, handlers, plan, kinds, act, obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.countPods(ctx, plan, obs); err != nil {
		return ctrl.Result{}, err
	}

	if deleting && len(obs.workloadErrs) == 0 && obs.unrestorable == 0 {
		r.Metrics.forget(scaler.Name)
		logger.Info("restored every parked workload; releasing the NSScaler")
		return ctrl.Result{}, r.removeFinalizer(ctx, &scaler)
	}
	if err := r.writeStatus(ctx, &scaler, obs); err != nil {
		return ctrl.Result{}, err
	}
	if len(obs.workloadErrs) > 0 {
		// Retried with backoff; the status already says what failed.
		return ctrl.Result{}, fmt.Errorf("%d workloads failed: %w", len(obs.workloadErrs), errors.Join(obs.workloadErrs...))
	}
	if len(obs.kindErrs) > 0 {
		return ctrl.Result{RequeueAfter: kindRetryAfter}, nil
	}
	return ctrl.Result{}, nil
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

type invalidSelectorError struct{ err error }

func (e *invalidSelectorError) Error() string { return e.err.Error() }
func (e *invalidSelectorError) Unwrap() error { return e.err }

// plan reads every NSScaler and namespace from the cache and plans.
func (r *Reconciler) plan(ctx context.Context, scaler *scalingv1alpha1.NSScaler) (Plan, error) {
	var scalers scalingv1alpha1.NSScalerList
	if err := r.Client.List(ctx, &scalers); err != nil {
		return Plan{}, fmt.Errorf("listing NSScalers: %w", err)
	}
	var nsList corev1.NamespaceList
	if err := r.Cache.List(ctx, &nsList, client.UnsafeDisableDeepCopy); err != nil {
		return Plan{}, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]Namespace, 0, len(nsList.Items))
	for i := range nsList.Items {
		namespaces = append(namespaces, Namespace{Name: nsList.Items[i].Name, Labels: nsList.Items[i].Labels})
	}
	plan, err := PlanNamespaces(scaler, scalers.Items, namespaces, r.protected)
	if err != nil {
		return plan, &invalidSelectorError{err: err}
	}
	return plan, nil
}

// releaseAll turns a plan into the one of a departing NSScaler: every
// namespace it owns is restored, none parked.
func releaseAll(p Plan) Plan {
	return Plan{
		Parked:    sets.New[string](),
		Active:    p.Parked.Union(p.Active),
		Conflicts: p.Conflicts,
		Foreign:   p.Foreign,
		Protected: p.Protected,
	}
}

// handlers returns the built-in handlers and those of the custom-resource
// kinds in the spec or still parked; kinds that are not available are
// reported in obs.
func (r *Reconciler) handlers(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) []kindHandler {
	hs := append([]kindHandler(nil), r.builtins...)
	custom := sets.New[KindKey]()
	for _, k := range scaler.Spec.Kinds {
		if k.Group != "" {
			custom.Insert(kindKeyOf(k))
		}
	}
	obs.previouslyParked = sets.New[KindKey]()
	for _, k := range scaler.Status.ParkedKinds {
		custom.Insert(kindKeyOf(k))
		obs.previouslyParked.Insert(kindKeyOf(k))
	}
	keys := custom.UnsortedList()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		h, err := r.customHandler(ctx, k)
		if err != nil {
			obs.kindUnhandled(k, err)
			continue
		}
		hs = append(hs, h)
	}
	return hs
}

// countPods counts the pods (from the metadata cache) in parked namespaces.
func (r *Reconciler) countPods(ctx context.Context, plan Plan, obs *observation) error {
	for _, ns := range sets.List(plan.Parked) {
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.Cache.List(ctx, pods, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		obs.podsRemaining += int32(len(pods.Items))
	}
	return nil
}

func (r *Reconciler) addFinalizer(ctx context.Context, s *scalingv1alpha1.NSScaler) error {
	before := s.DeepCopy()
	controllerutil.AddFinalizer(s, Finalizer)
	if err := r.Client.Patch(ctx, s, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, s *scalingv1alpha1.NSScaler) error {
	before := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, Finalizer)
	if err := r.Client.Patch(ctx, s, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	return nil
}

// workloadRef names a workload in errors and events.
func workloadRef(w Workload) string {
	return fmt.Sprintf("%s %s", w.Kind, types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
}
