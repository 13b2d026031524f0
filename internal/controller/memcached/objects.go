package memcached

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// prepare resolves the settings and reads the Secrets the spec names. The
// observation it returns says why nothing may be applied, if anything:
// an invalid spec, a Secret that may not be used, the fingerprint key.
func (r *Reconciler) prepare(ctx context.Context, mc *cachev1alpha1.Memcached) (settings, observation) {
	s, invalid := resolveSettings(&mc.Spec)
	obs := observation{generation: mc.Generation, size: s.Size, kind: s.Kind, invalid: invalid,
		tls: tlsObservation{on: mc.Spec.TLS != nil}}
	if invalid != nil {
		return s, obs
	}
	s.TLSAgentImage = cmp.Or(r.TLSAgentImage, DefaultTLSAgentImage)
	if ok, err := r.prepareIssuance(ctx, mc, s, &obs); !ok || err != nil {
		obs.applyErr = err
		return s, obs
	}
	uses := secretUses(s, &mc.Spec)
	observeCertificate(uses, s.TLS, &obs)
	obs.usesSecrets = len(uses) > 0
	hash, err := r.checkSecrets(ctx, mc.Namespace, uses)
	asSecretProblem(err, &obs)
	s.SecretHash = hash
	return s, obs
}

// reconcileObjects applies the Service, the workload, the PDB, the
// NetworkPolicy and the ServiceMonitor (unless obs says nothing may be
// applied; then it only observes) and records what it saw in obs. The
// first apiserver error ends it.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, obs *observation) {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	apply := obs.mayApply()

	svc, err := r.reconcileService(ctx, mc, s, apply, obs)
	if err != nil {
		obs.applyErr = err
		return
	}
	if err := r.reconcileWorkload(ctx, mc, s, apply, obs); err != nil {
		obs.applyErr = err
		return
	}
	if err := r.reconcilePDB(ctx, mc, s, apply, obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling PodDisruptionBudget %s: %w", key, err)
		return
	}
	if err := r.reconcileNetworkPolicy(ctx, mc, s, apply, obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling NetworkPolicy %s: %w", key, err)
		return
	}
	hadServiceMonitor := svc != nil && svc.Annotations[AnnotationServiceMonitor] == "true"
	if err := r.reconcileServiceMonitor(ctx, mc, s, apply, hadServiceMonitor, obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling ServiceMonitor %s: %w", key, err)
	}
}

// reconcileWorkload applies the workload of the spec's kind. The kind
// cannot change (the CRD refuses it), so the other kind is never looked at.
func (r *Reconciler) reconcileWorkload(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	if s.Kind == cachev1alpha1.WorkloadStatefulSet {
		return reconcileOwnedWorkload(ctx, r, statefulSetWorkload, mc, s, apply, obs)
	}
	return reconcileOwnedWorkload(ctx, r, deploymentWorkload, mc, s, apply, obs)
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
