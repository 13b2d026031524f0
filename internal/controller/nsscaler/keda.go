package nsscaler

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KEDA. A workload that a ScaledObject autoscales belongs to KEDA: setting
// its replicas would start a fight with KEDA's own scaling. It is parked by
// pausing the ScaledObject instead, at spec.parkedReplicas or at what the
// workload runs when that is fewer (Workload.parkCount): KEDA then scales
// the workload to that count itself and stops autoscaling it. The guarantee
// is every park's: the ScaledObject's previous paused-replicas annotation is
// recorded in AnnotationOriginal in the same merge patch that sets it, and
// a restore puts it back (or removes it) in one patch. The workload itself
// is never written; after the restore KEDA decides its replicas.
const (
	// AnnotationKEDAPausedReplicas pauses a ScaledObject at a replica
	// count (KEDA ≥ 2.8).
	AnnotationKEDAPausedReplicas = "autoscaling.keda.sh/paused-replicas"
)

var (
	kindScaledObject = KindKey{Group: "keda.sh", Kind: "ScaledObject"}
	scaledObjectGVK  = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
)

// scaledObjectHandler handles KEDA ScaledObjects, read as unstructured from
// the workload cache (trimmed to metadata and spec.scaleTargetRef).
type scaledObjectHandler struct {
	workloadAccess
	gvk schema.GroupVersionKind
}

func (h *scaledObjectHandler) key() KindKey { return kindScaledObject }

func (h *scaledObjectHandler) objectKind() schema.GroupVersionKind { return h.gvk }

// targetKind maps a scaleTargetRef to the kind spec.kinds names: the
// built-ins without their group.
func targetKind(apiVersion, kind string) KindKey {
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	switch {
	case kind == "":
		return kindDeployment
	case group == "apps" && (kind == kindDeployment.Kind || kind == kindStatefulSet.Kind):
		return KindKey{Kind: kind}
	}
	return KindKey{Group: group, Kind: kind}
}

func (h *scaledObjectHandler) toWorkload(u *unstructured.Unstructured) Workload {
	w := baseWorkload(kindScaledObject, u)
	apiVersion, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "kind")
	w.TargetName, _, _ = unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
	w.Target = targetKind(apiVersion, kind)
	if v, ok := u.GetAnnotations()[AnnotationKEDAPausedReplicas]; ok {
		w.PausedReplicas = &v
	}
	return w
}

func (h *scaledObjectHandler) each(ctx context.Context, fn func(Workload)) error {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(h.gvk.GroupVersion().WithKind(h.gvk.Kind + "List"))
	if err := h.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing %s: %w", kindScaledObject, err)
	}
	for i := range l.Items {
		fn(h.toWorkload(&l.Items[i]))
	}
	return nil
}

func (h *scaledObjectHandler) newObj(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(h.gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func (h *scaledObjectHandler) cached(ctx context.Context, namespace, name string) (Workload, bool, error) {
	return readCached(ctx, h.workloadAccess, h.newObj(namespace, name), h.toWorkload)
}

func (h *scaledObjectHandler) get(ctx context.Context, namespace, name string) (Workload, bool, error) {
	u := h.newObj(namespace, name)
	if err := h.apiReader.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return Workload{}, false, nil
		}
		return Workload{}, false, fmt.Errorf("reading %s %s/%s: %w", kindScaledObject, namespace, name, err)
	}
	return h.toWorkload(u), true, nil
}

// patchAnnotations merge-patches the ScaledObject's annotations (nil
// values remove) with its resourceVersion as precondition.
func (h *scaledObjectHandler) patchAnnotations(ctx context.Context, w Workload, annotations map[string]any) (Workload, error) {
	body := mustJSON(map[string]any{"metadata": map[string]any{"resourceVersion": w.ResourceVersion, "annotations": annotations}})
	u := h.newObj(w.Namespace, w.Name)
	if err := h.patcher.patch(ctx, u, body); err != nil {
		return Workload{}, err
	}
	return h.toWorkload(u), nil
}

func (h *scaledObjectHandler) park(ctx context.Context, w Workload, record *Original, replicas int32) (Workload, error) {
	ann := map[string]any{AnnotationKEDAPausedReplicas: strconv.Itoa(int(replicas))}
	if record != nil {
		ann[AnnotationOriginal] = record.Encode()
	}
	return h.patchAnnotations(ctx, w, ann)
}

func (h *scaledObjectHandler) restore(ctx context.Context, w Workload, orig Original) (Workload, error) {
	ann := map[string]any{AnnotationOriginal: nil, AnnotationKEDAPausedReplicas: nil}
	if orig.Pause != nil && orig.Pause.Replicas != nil {
		ann[AnnotationKEDAPausedReplicas] = *orig.Pause.Replicas
	}
	return h.patchAnnotations(ctx, w, ann)
}

// scaledObjectTargets are the workloads the ScaledObjects autoscale, by
// namespace, kind and name: a scaleTargetRef names a workload of the
// ScaledObject's own namespace, so a ScaledObject never affects another
// namespace.
func scaledObjectTargets(objects []Workload) map[targetRef]struct{} {
	out := make(map[targetRef]struct{}, len(objects))
	for _, so := range objects {
		if so.TargetName != "" {
			out[targetRef{kind: so.Target, namespace: so.Namespace, name: so.TargetName}] = struct{}{}
		}
	}
	return out
}

// targetRef names a workload.
type targetRef struct {
	kind            KindKey
	namespace, name string
}

func refOf(w Workload) targetRef {
	return targetRef{kind: w.Kind, namespace: w.Namespace, name: w.Name}
}
