package memcached

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Kinds of other projects (cert-manager's Certificate, prometheus-operator's
// ServiceMonitor) are built and applied unstructured: the manager does not
// link their types, and the cluster may not serve them.

// getUnstructured reads the object of kind gvk at key (nil when there is
// none).
func getUnstructured(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return getLive(ctx, c, key, obj)
}

// ownedUnstructured is the object of kind gvk that mc controls, named and
// namespaced like mc, with labels and spec.
func ownedUnstructured(mc *cachev1alpha1.Memcached, gvk schema.GroupVersionKind, labels, spec map[string]any) *unstructured.Unstructured {
	owner := ownerReference(mc)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata": map[string]any{
			"name":      mc.Name,
			"namespace": mc.Namespace,
			"labels":    labels,
			"ownerReferences": []any{map[string]any{
				"apiVersion": *owner.APIVersion, "kind": *owner.Kind, "name": *owner.Name, "uid": string(*owner.UID),
				"controller": true, "blockOwnerDeletion": true,
			}},
		},
		"spec": spec,
	}}
}

// anyMap merges string maps into the map[string]any an unstructured
// object holds; a later map wins a key.
func anyMap(maps ...map[string]string) map[string]any {
	out := map[string]any{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// applyUnstructured applies desired unless holds (live, nil when absent,
// already has every field of it); applied says it did.
func (r *Reconciler) applyUnstructured(ctx context.Context, mc *cachev1alpha1.Memcached, desired, live *unstructured.Unstructured, holds bool,
	obs *observation) (applied bool, err error) {
	if holds {
		return false, nil
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s: %w", desired.GetKind(), err)
	}
	r.eventForApply(mc, obs, desired.GetKind(), live == nil, true)
	return true, nil
}

// isSubset reports whether every value in want is present, equal, in have
// (maps may have extra keys in have; lists must have the same length).
func isSubset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !isSubset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !isSubset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(want) == fmt.Sprint(have)
	}
}

// servesKind asks discovery (through the manager's RESTMapper, which
// remembers a kind once found) whether the cluster serves gvk.
func servesKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up the %s kind: %w", gvk.Kind, err)
	}
	return true, nil
}
