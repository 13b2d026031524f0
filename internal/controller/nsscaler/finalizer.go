package nsscaler

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// Finalizer holds an NSScaler until its parked workloads are restored.
const Finalizer = "scaling.runbook.dev/restore"

// handleFinalizer adds the finalizer to a live NSScaler and releases a
// deleted one whose policy keeps its workloads parked. stop is true when the
// reconcile has nothing more to do.
func (r *Reconciler) handleFinalizer(ctx context.Context, scaler *scalingv1alpha1.NSScaler) (stop bool, err error) {
	deleting := !scaler.DeletionTimestamp.IsZero()
	held := controllerutil.ContainsFinalizer(scaler, Finalizer)
	switch {
	case deleting && !held:
		return true, nil
	case deleting && scaler.Spec.DeletionPolicy == scalingv1alpha1.DeletionPolicyKeep:
		log.FromContext(ctx).Info("deleted with deletionPolicy Keep: workloads stay parked")
		return true, r.release(ctx, scaler)
	case !deleting && !held:
		return false, r.patchFinalizer(ctx, scaler, controllerutil.AddFinalizer)
	}
	return false, nil
}

// release lets a departing NSScaler go: its metrics and the status writer's
// memory of it are dropped and the finalizer removed.
func (r *Reconciler) release(ctx context.Context, scaler *scalingv1alpha1.NSScaler) error {
	r.forget(client.ObjectKeyFromObject(scaler))
	return client.IgnoreNotFound(r.patchFinalizer(ctx, scaler, controllerutil.RemoveFinalizer))
}

// patchFinalizer adds or removes the finalizer with a merge patch that
// carries the resourceVersion (a finalizer list is replaced whole).
func (r *Reconciler) patchFinalizer(ctx context.Context, scaler *scalingv1alpha1.NSScaler,
	change func(client.Object, string) bool) error {
	before := scaler.DeepCopy()
	change(scaler, Finalizer)
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, scaler, patch, client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("updating the finalizer of NSScaler %s: %w", scaler.Name, err)
	}
	return nil
}
