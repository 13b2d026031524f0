package nsscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of every write the controller makes.
const FieldManager = "runbook-nsscaler"

// kindHandler reads and writes the workloads of one kind. Reads of the whole
// kind come from the informer cache; single fresh reads (after a conflict)
// from the apiserver.
type kindHandler interface {
	key() KindKey
	// list returns every object of the kind in the cluster.
	list(ctx context.Context) ([]Workload, error)
	// get reads one object from the apiserver; found is false when it is gone.
	get(ctx context.Context, namespace, name string) (w Workload, found bool, err error)
	// park puts the workload in its parked state. When record is non-nil
	// the original is recorded in the same write (or, for the scale
	// subresource, in the write before). It returns the state written.
	park(ctx context.Context, w Workload, record *Original) (Workload, error)
	// restore returns the workload to orig and removes the annotation.
	restore(ctx context.Context, w Workload, orig Original) (Workload, error)
}

// mergePatch builds a JSON merge patch that sets (value non-nil) or removes
// (value nil) the annotation, sets spec fields, and, when resourceVersion is
// set, makes the apiserver refuse the write with 409 if the object changed
// since it was read.
func mergePatch(resourceVersion string, annotation *string, removeAnnotation bool, spec map[string]any) []byte {
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	switch {
	case annotation != nil:
		meta["annotations"] = map[string]any{AnnotationOriginal: *annotation}
	case removeAnnotation:
		meta["annotations"] = map[string]any{AnnotationOriginal: nil}
	}
	body := map[string]any{}
	if len(meta) > 0 {
		body["metadata"] = meta
	}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("encoding merge patch: %v", err)) // maps of plain values always marshal
	}
	return b
}

func isControlled(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func baseWorkload(k KindKey, obj client.Object) Workload {
	v, ok := obj.GetAnnotations()[AnnotationOriginal]
	return Workload{
		Kind: k, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), Annotation: v, HasAnnotation: ok,
		Controlled: isControlled(obj.GetOwnerReferences()),
	}
}

// builtinHandler handles Deployments, StatefulSets (spec.replicas) and
// CronJobs (spec.suspend) with one JSON merge patch per write.
type builtinHandler struct {
	kind      KindKey
	gvk       schema.GroupVersionKind
	cache     client.Reader
	apiReader client.Reader
	writer    client.Writer
	newObj    func() client.Object
	newList   func() client.ObjectList
	each      func(client.ObjectList, func(client.Object))
	state     func(client.Object, *Workload)
}

func (h *builtinHandler) key() KindKey { return h.kind }

func (h *builtinHandler) toWorkload(obj client.Object) Workload {
	w := baseWorkload(h.kind, obj)
	h.state(obj, &w)
	return w
}

func (h *builtinHandler) list(ctx context.Context) ([]Workload, error) {
	l := h.newList()
	// The workloads are only read: skip the deep copy of thousands of objects.
	if err := h.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing %s: %w", h.kind, err)
	}
	var out []Workload
	h.each(l, func(o client.Object) { out = append(out, h.toWorkload(o)) })
	return out, nil
}

func (h *builtinHandler) get(ctx context.Context, namespace, name string) (Workload, bool, error) {
	obj := h.newObj()
	if err := h.apiReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return Workload{}, false, nil
		}
		return Workload{}, false, fmt.Errorf("reading %s %s/%s: %w", h.kind, namespace, name, err)
	}
	return h.toWorkload(obj), true, nil
}

func (h *builtinHandler) specFor(replicas *int32, suspend *bool) map[string]any {
	if h.kind.suspends() {
		return map[string]any{"suspend": *suspend}
	}
	return map[string]any{"replicas": *replicas}
}

// patch sends the merge patch and asks only for the metadata back (the
// apiserver then sends a small PartialObjectMetadata instead of the whole
// object); the spec field is the one just written.
func (h *builtinHandler) patch(ctx context.Context, w Workload, body []byte, replicas int32, suspend bool) (Workload, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(h.gvk)
	obj.SetNamespace(w.Namespace)
	obj.SetName(w.Name)
	if err := h.writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return Workload{}, err
	}
	written := baseWorkload(h.kind, obj)
	written.Replicas, written.Suspend = replicas, suspend
	return written, nil
}

func (h *builtinHandler) park(ctx context.Context, w Workload, record *Original) (Workload, error) {
	var ann *string
	if record != nil {
		s := record.Encode()
		ann = &s
	}
	zero, suspended := int32(0), true
	return h.patch(ctx, w, mergePatch(w.ResourceVersion, ann, false, h.specFor(&zero, &suspended)), zero, suspended)
}

func (h *builtinHandler) restore(ctx context.Context, w Workload, orig Original) (Workload, error) {
	return h.patch(ctx, w, mergePatch(w.ResourceVersion, nil, true, h.specFor(orig.Replicas, orig.Suspend)),
		ptr.Deref(orig.Replicas, 0), ptr.Deref(orig.Suspend, false))
}

func newDeploymentHandler(cache, apiReader client.Reader, writer client.Writer) *builtinHandler {
	return &builtinHandler{
		kind: kindDeployment, gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), cache: cache, apiReader: apiReader, writer: writer,
		newObj:  func() client.Object { return &appsv1.Deployment{} },
		newList: func() client.ObjectList { return &appsv1.DeploymentList{} },
		each: func(l client.ObjectList, f func(client.Object)) {
			for i := range l.(*appsv1.DeploymentList).Items {
				f(&l.(*appsv1.DeploymentList).Items[i])
			}
		},
		state: func(o client.Object, w *Workload) {
			w.Replicas = replicasOrDefault(o.(*appsv1.Deployment).Spec.Replicas)
		},
	}
}

func newStatefulSetHandler(cache, apiReader client.Reader, writer client.Writer) *builtinHandler {
	return &builtinHandler{
		kind: kindStatefulSet, gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), cache: cache, apiReader: apiReader, writer: writer,
		newObj:  func() client.Object { return &appsv1.StatefulSet{} },
		newList: func() client.ObjectList { return &appsv1.StatefulSetList{} },
		each: func(l client.ObjectList, f func(client.Object)) {
			for i := range l.(*appsv1.StatefulSetList).Items {
				f(&l.(*appsv1.StatefulSetList).Items[i])
			}
		},
		state: func(o client.Object, w *Workload) {
			w.Replicas = replicasOrDefault(o.(*appsv1.StatefulSet).Spec.Replicas)
		},
	}
}

func newCronJobHandler(cache, apiReader client.Reader, writer client.Writer) *builtinHandler {
	return &builtinHandler{
		kind: kindCronJob, gvk: batchv1.SchemeGroupVersion.WithKind("CronJob"), cache: cache, apiReader: apiReader, writer: writer,
		newObj:  func() client.Object { return &batchv1.CronJob{} },
		newList: func() client.ObjectList { return &batchv1.CronJobList{} },
		each: func(l client.ObjectList, f func(client.Object)) {
			for i := range l.(*batchv1.CronJobList).Items {
				f(&l.(*batchv1.CronJobList).Items[i])
			}
		},
		state: func(o client.Object, w *Workload) {
			s := o.(*batchv1.CronJob).Spec.Suspend
			w.Suspend = s != nil && *s
		},
	}
}

// replicasOrDefault is the apiserver's default for an unset replica count.
func replicasOrDefault(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// scaleHandler handles a custom resource with a scale subresource. The
// replica count is read from the cached object at the CRD's specReplicasPath;
// writes go through the scale subresource, so the annotation is written first
// (its own merge patch) and the scale second. A crash between the two leaves
// the original recorded and the workload running: the next reconcile parks it.
type scaleHandler struct {
	kind         KindKey
	gvk          schema.GroupVersionKind
	replicasPath []string
	cache        client.Reader
	apiReader    client.Reader
	client       client.Client
}

func (h *scaleHandler) key() KindKey { return h.kind }

func (h *scaleHandler) toWorkload(u *unstructured.Unstructured) Workload {
	w := baseWorkload(h.kind, u)
	r, found, err := unstructured.NestedInt64(u.Object, h.replicasPath...)
	if err == nil && found {
		w.Replicas = int32(r)
	}
	return w
}

func (h *scaleHandler) list(ctx context.Context) ([]Workload, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(h.gvk.GroupVersion().WithKind(h.gvk.Kind + "List"))
	if err := h.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing %s: %w", h.kind, err)
	}
	out := make([]Workload, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, h.toWorkload(&l.Items[i]))
	}
	return out, nil
}

func (h *scaleHandler) newObj(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(h.gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
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
	if err := h.client.Patch(ctx, u, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return Workload{}, err
	}
	return h.toWorkload(u), nil
}

func (h *scaleHandler) scale(ctx context.Context, w Workload, replicas int32) (Workload, error) {
	u := h.newObj(w.Namespace, w.Name)
	body := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if err := h.client.SubResource("scale").Patch(ctx, u, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return Workload{}, fmt.Errorf("scaling %s %s/%s to %d: %w", h.kind, w.Namespace, w.Name, replicas, err)
	}
	// The response is the Scale object; its resourceVersion is the object's.
	w.Replicas = replicas
	w.ResourceVersion = u.GetResourceVersion()
	return w, nil
}

func (h *scaleHandler) park(ctx context.Context, w Workload, record *Original) (Workload, error) {
	if record != nil {
		s := record.Encode()
		var err error
		if w, err = h.patchObject(ctx, w, mergePatch(w.ResourceVersion, &s, false, nil)); err != nil {
			return Workload{}, err
		}
	}
	if w.Replicas == 0 {
		return w, nil
	}
	return h.scale(ctx, w, 0)
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
