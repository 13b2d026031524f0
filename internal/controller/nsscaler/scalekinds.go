package nsscaler

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// scaleHandler handles a custom resource with a scale subresource. The
// replica count is read from the cached object at the CRD's specReplicasPath;
// writes go through the scale subresource, so the annotation is written first
// (its own merge patch) and the scale second. A crash between the two leaves
// the original recorded and the workload running: the next reconcile parks it.
type scaleHandler struct {
	workloadAccess
	kind         KindKey
	gvk          schema.GroupVersionKind
	replicasPath []string
}

func (h *scaleHandler) key() KindKey { return h.kind }

func (h *scaleHandler) objectKind() schema.GroupVersionKind { return h.gvk }

func (h *scaleHandler) toWorkload(u *unstructured.Unstructured) Workload {
	w := baseWorkload(h.kind, u)
	r, found, err := unstructured.NestedInt64(u.Object, h.replicasPath...)
	if err == nil && found {
		w.Replicas = int32(r)
	}
	return w
}

func (h *scaleHandler) each(ctx context.Context, fn func(Workload)) error {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(h.gvk.GroupVersion().WithKind(h.gvk.Kind + "List"))
	if err := h.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing %s: %w", h.kind, err)
	}
	for i := range l.Items {
		fn(h.toWorkload(&l.Items[i]))
	}
	return nil
}

func (h *scaleHandler) newObj(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(h.gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func (h *scaleHandler) cached(ctx context.Context, namespace, name string) (Workload, bool, error) {
	return readCached(ctx, h.workloadAccess, h.newObj(namespace, name), h.toWorkload)
}

func (h *scaleHandler) get(ctx context.Context, namespace, name string) (Workload, bool, error) {
	u := h.newObj(namespace, name)
	if err := h.apiReader.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return Workload{}, false, nil
		}
		return Workload{}, false, fmt.Errorf("reading %s %s/%s: %w", h.kind, namespace, name, err)
	}
	return h.toWorkload(u), true, nil
}

func (h *scaleHandler) patchObject(ctx context.Context, w Workload, body []byte) (Workload, error) {
	u := h.newObj(w.Namespace, w.Name)
	if err := h.patcher.patch(ctx, u, body); err != nil {
		return Workload{}, err
	}
	return h.toWorkload(u), nil
}

func (h *scaleHandler) scale(ctx context.Context, w Workload, replicas int32) (Workload, error) {
	u := h.newObj(w.Namespace, w.Name)
	body := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if err := h.patcher.patchScale(ctx, u, body); err != nil {
		return Workload{}, fmt.Errorf("scaling %s %s/%s to %d: %w", h.kind, w.Namespace, w.Name, replicas, err)
	}
	// The response is the Scale object; its resourceVersion is the object's.
	w.Replicas = replicas
	w.ResourceVersion = u.GetResourceVersion()
	return w, nil
}

func (h *scaleHandler) park(ctx context.Context, w Workload, record *Original, replicas int32) (Workload, error) {
	if record != nil {
		s := record.Encode()
		var err error
		if w, err = h.patchObject(ctx, w, mergePatch(w.ResourceVersion, &s, false, nil)); err != nil {
			return Workload{}, err
		}
	}
	if w.Replicas == replicas {
		return w, nil
	}
	return h.scale(ctx, w, replicas)
}

func (h *scaleHandler) restore(ctx context.Context, w Workload, orig Original) (Workload, error) {
	if w.Replicas != *orig.Replicas {
		var err error
		if w, err = h.scale(ctx, w, *orig.Replicas); err != nil {
			return Workload{}, err
		}
	}
	// Only the annotation's own removal; the scale is already restored.
	return h.patchObject(ctx, w, mergePatch("", nil, true, nil))
}

// specReplicasPath reads the CRD of gvk (as unstructured, so no extra types
// are needed) and returns the field path of its scale subresource's
// specReplicasPath, e.g. [spec replicas].
func specReplicasPath(ctx context.Context, apiReader client.Reader, gvk schema.GroupVersionKind, plural string) ([]string, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := apiReader.Get(ctx, client.ObjectKey{Name: plural + "." + gvk.Group}, crd); err != nil {
		return nil, fmt.Errorf("reading CRD %s.%s: %w", plural, gvk.Group, err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok || vm["name"] != gvk.Version {
			continue
		}
		p, found, _ := unstructured.NestedString(vm, "subresources", "scale", "specReplicasPath")
		if !found || !strings.HasPrefix(p, ".") {
			return nil, fmt.Errorf("%s %s has no scale subresource", gvk.Kind, gvk.GroupVersion())
		}
		return strings.Split(strings.TrimPrefix(p, "."), "."), nil
	}
	return nil, fmt.Errorf("CRD %s.%s does not serve version %s", plural, gvk.Group, gvk.Version)
}

// resolveDynamicKind builds the handler of a run-time kind: a KEDA
// ScaledObject, or a custom resource with a scale subresource (its CRD
// tells where the replica count is).
func resolveDynamicKind(access workloadAccess) func(ctx context.Context, k KindKey, mapping *meta.RESTMapping) (kindHandler, error) {
	return func(ctx context.Context, k KindKey, mapping *meta.RESTMapping) (kindHandler, error) {
		if k == kindScaledObject {
			return &scaledObjectHandler{workloadAccess: access, gvk: mapping.GroupVersionKind}, nil
		}
		path, err := specReplicasPath(ctx, access.apiReader, mapping.GroupVersionKind, mapping.Resource.Resource)
		if err != nil {
			return nil, err
		}
		return &scaleHandler{workloadAccess: access, kind: k, gvk: mapping.GroupVersionKind, replicasPath: path}, nil
	}
}

func schemaGroupKind(k KindKey) schema.GroupKind {
	return schema.GroupKind{Group: k.Group, Kind: k.Kind}
}
