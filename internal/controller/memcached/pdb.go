package memcached

import (
	"context"
	"errors"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/util/retry"
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
		return r.deletePDB(ctx, mc, pdb, obs)
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
// sure that exactly the object that was seen as owned is deleted. The
// disruption controller writes the PDB's status, so the copy seen is often
// a resourceVersion behind: on a conflict the live PDB is read again and,
// while it is still ours, deleted with its own preconditions.
func (r *Reconciler) deletePDB(ctx context.Context, mc *cachev1alpha1.Memcached, pdb *policyv1.PodDisruptionBudget, obs *observation) error {
	deleted := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if pdb == nil || !metav1.IsControlledBy(pdb, mc) {
			return nil
		}
		err := r.Client.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID, ResourceVersion: &pdb.ResourceVersion})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			pdb, err = getLive(ctx, r.freshReader(), client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{})
			if err != nil {
				return err
			}
			return apierrors.NewConflict(policyv1.Resource("poddisruptionbudgets"), mc.Name, errors.New("changed since it was read"))
		case err != nil:
			return err
		}
		deleted = true
		return nil
	})
	if err != nil || !deleted {
		return err
	}
	obs.events.Normal(mc, nil, cachev1alpha1.EventDeleted, "Delete", "Deleted PodDisruptionBudget %s: it is disabled or size is at most 1", mc.Name)
	return nil
}

// freshReader reads from the apiserver, past the cache.
func (r *Reconciler) freshReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
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
