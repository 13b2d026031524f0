package memcached

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// reconcilePDB applies the PodDisruptionBudget when it is enabled and
// deletes the owned one when it is not.
func (r *Reconciler) reconcilePDB(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	pdb, err := getLive(ctx, r.Client, key, &policyv1.PodDisruptionBudget{})
	if err != nil {
		return err
	}
	switch {
	case pdb != nil && !metav1.IsControlledBy(pdb, mc):
		if s.PDBEnabled {
			obs.foreign = append(obs.foreign, describeForeign("PodDisruptionBudget", pdb, mc))
		}
		return nil
	case !apply:
		return nil
	case !s.PDBEnabled:
		return r.deletePDB(ctx, mc, pdb)
	}
	var cached client.Object
	if pdb != nil {
		cached = pdb
	}
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), func() (runtime.ApplyConfiguration, error) { return desiredPDB(mc, s), nil }, cached, &policyv1.PodDisruptionBudget{}, func() (any, error) { return policyv1ac.ExtractPodDisruptionBudget(pdb, FieldManager) })
	if err != nil {
		return err
	}
	r.eventForApply(mc, obs, "PodDisruptionBudget", pdb == nil, applied)
	return nil
}

// deletePDB deletes the owned PDB (nil: there is none). Preconditions make
// sure that exactly the object that was seen as owned is deleted.
func (r *Reconciler) deletePDB(ctx context.Context, mc *cachev1alpha1.Memcached, pdb *policyv1.PodDisruptionBudget) error {
	if pdb == nil {
		return nil
	}
	if err := r.Client.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID, ResourceVersion: &pdb.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.Events.Normal(mc, nil, cachev1alpha1.EventDeleted, "Delete", "Deleted PodDisruptionBudget %s: it is disabled or size is at most 1", mc.Name)
	return nil
}

// desiredPDB is the PodDisruptionBudget of mc. Unhealthy instances may
// always be evicted: they serve nothing, and blocking a node drain on them
// helps no one.
func desiredPDB(mc *cachev1alpha1.Memcached, s settings) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(s.PDBMaxUnavail).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}
