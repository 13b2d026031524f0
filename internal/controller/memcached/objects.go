package memcached

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// reconcileObjects applies the Service, the Deployment, the PDB and the
// ServiceMonitor (unless the spec is invalid, then it only observes) and
// returns what it saw. The first apiserver error ends it.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, invalid error) observation {
	obs := observation{generation: mc.Generation, size: s.Size, invalid: invalid}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	apply := invalid == nil

	svc, err := r.reconcileService(ctx, mc, s, apply, &obs)
	if err != nil {
		obs.applyErr = err
		return obs
	}
	if err := r.reconcileDeployment(ctx, mc, s, apply, &obs); err != nil {
		obs.applyErr = err
		return obs
	}
	if err := r.reconcilePDB(ctx, mc, s, apply, &obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling PodDisruptionBudget %s: %w", key, err)
		return obs
	}
	hadServiceMonitor := svc != nil && svc.Annotations[AnnotationServiceMonitor] == "true"
	if err := r.reconcileServiceMonitor(ctx, mc, s, apply, hadServiceMonitor, &obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling ServiceMonitor %s: %w", key, err)
	}
	return obs
}

// getLive reads the object of key into obj and returns it, or nil (the
// zero T) when there is none.
func getLive[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	switch err := c.Get(ctx, key, obj); {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, err
	}
	return obj, nil
}
