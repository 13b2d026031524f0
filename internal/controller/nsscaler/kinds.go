package nsscaler

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kindHandler reads and writes the workloads of one kind. Reads of the whole
// kind come from the informer cache; single fresh reads (after a conflict)
// from the apiserver.
type kindHandler interface {
	key() KindKey
	// objectKind is the kind's API group, version and kind.
	objectKind() schema.GroupVersionKind
	// each calls fn with every object of the kind in the cluster, one at a
	// time: a pass converts each cached object as it decides on it and
	// holds no Workload per object.
	each(ctx context.Context, fn func(Workload)) error
	// get reads one object from the apiserver; found is false when it is gone.
	get(ctx context.Context, namespace, name string) (w Workload, found bool, err error)
	// cached reads one object from the cache; found is false when the
	// cache does not hold it.
	cached(ctx context.Context, namespace, name string) (w Workload, found bool, err error)
	// park puts the workload in its parked state: replicas (a
	// ScaledObject: paused at replicas; a CronJob: suspended). When
	// record is non-nil the original is recorded in the same write (or,
	// for the scale subresource, in the write before). It returns the
	// state written.
	park(ctx context.Context, w Workload, record *Original, replicas int32) (Workload, error)
	// restore returns the workload to orig and removes the annotation.
	restore(ctx context.Context, w Workload, orig Original) (Workload, error)
}

// workloadAccess is how the handlers reach workloads: lists from the
// (trimmed) cache, fresh single reads from the apiserver, writes through the
// patcher.
type workloadAccess struct {
	cache     client.Reader
	apiReader client.Reader
	patcher   workloadPatcher
	// informers, when set, are the cache's informers: the built-in kinds
	// are then read from their stores directly (cachedObjects).
	informers cache.Informers
}

// cachedObjects returns the objects an informer of obj's kind holds, the
// cache's own (trimmed, shared: only to be read), and false when there is
// no synced informer to read. A List from the cache would build a typed
// list that copies every object into one slice — a copy of the whole cache,
// however trimmed, on every reconcile — to be converted into Workloads and
// dropped at once.
func (a workloadAccess) cachedObjects(ctx context.Context, obj client.Object) ([]any, bool) {
	store, ok := a.store(ctx, obj)
	if !ok {
		return nil, false
	}
	return store.List(), true
}

// store is the synced informer store of obj's kind, if there is one.
func (a workloadAccess) store(ctx context.Context, obj client.Object) (toolscache.Store, bool) {
	if a.informers == nil {
		return nil, false
	}
	inf, err := a.informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, false
	}
	si, ok := inf.(toolscache.SharedIndexInformer)
	if !ok || !si.HasSynced() {
		return nil, false
	}
	return si.GetStore(), true
}

// cachedGet reads obj (namespace and name set) from the cache.
func (a workloadAccess) cachedGet(ctx context.Context, obj client.Object) (found bool, err error) {
	if err := a.cache.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s/%s from the cache: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return true, nil
}

// readCached reads obj (namespace and name set) from the cache and
// converts it with conv.
func readCached[T client.Object](ctx context.Context, a workloadAccess, obj T, conv func(T) Workload) (Workload, bool, error) {
	found, err := a.cachedGet(ctx, obj)
	if !found {
		return Workload{}, false, err
	}
	return conv(obj), true, nil
}

func baseWorkload(k KindKey, obj client.Object) Workload {
	ann := obj.GetAnnotations()
	v, ok := ann[AnnotationOriginal]
	return Workload{
		Kind: k, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), Created: obj.GetCreationTimestamp().Time, Annotation: v, HasAnnotation: ok,
		Controlled: metav1.GetControllerOfNoCopy(obj) != nil,
		Labels:     obj.GetLabels(), Exclude: ann[AnnotationExclude], ExcludeUntil: ann[AnnotationExcludeUntil],
		ArgoCDTrackingID: ann[AnnotationArgoCDTrackingID],
	}
}

// builtinHandler handles Deployments, StatefulSets (spec.replicas) and
// CronJobs (spec.suspend) with one JSON merge patch per write.
type builtinHandler struct {
	workloadAccess
	kind    KindKey
	gvk     schema.GroupVersionKind
	newObj  func() client.Object
	newList func() client.ObjectList
	// state reads the replica count or suspend flag.
	state func(client.Object, *Workload)
}

func (h *builtinHandler) key() KindKey { return h.kind }

func (h *builtinHandler) objectKind() schema.GroupVersionKind { return h.gvk }

func (h *builtinHandler) toWorkload(obj client.Object) Workload {
	w := baseWorkload(h.kind, obj)
	if c, ok := obj.(*cachedWorkload); ok {
		w.Replicas, w.Suspend, w.Requests = c.Replicas, c.Suspend, c.Requests
		return w
	}
	h.state(obj, &w)
	w.Requests = podRequestsOf(obj)
	return w
}

func (h *builtinHandler) each(ctx context.Context, fn func(Workload)) error {
	if objs, ok := h.cachedObjects(ctx, h.newObj()); ok {
		for i, o := range objs {
			// The pass decides at the pace of its writes, and the watch
			// replaces each written object in the cache meanwhile: a slice
			// that still pointed at the decided ones would keep every
			// replaced copy alive until the pass ends (the cache twice over
			// by the end of a mass park).
			objs[i] = nil
			if obj, ok := o.(client.Object); ok {
				fn(h.toWorkload(obj))
			}
		}
		return nil
	}
	l := h.newList()
	// The workloads are only read: skip the deep copy of thousands of objects.
	if err := h.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing %s: %w", h.kind, err)
	}
	return meta.EachListItem(l, func(o runtime.Object) error {
		fn(h.toWorkload(o.(client.Object)))
		return nil
	})
}

func (h *builtinHandler) cached(ctx context.Context, namespace, name string) (Workload, bool, error) {
	if store, ok := h.store(ctx, h.newObj()); ok {
		o, exists, err := store.GetByKey(namespace + "/" + name)
		obj, isObj := o.(client.Object)
		if err != nil || !exists || !isObj {
			return Workload{}, false, err
		}
		return h.toWorkload(obj), true, nil
	}
	obj := h.newObj()
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return readCached(ctx, h.workloadAccess, obj, h.toWorkload)
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
	if err := h.patcher.patch(ctx, obj, body); err != nil {
		return Workload{}, err
	}
	written := baseWorkload(h.kind, obj)
	written.Replicas, written.Suspend = replicas, suspend
	// The patch leaves the labels alone: keep the cached copy's map (shared
	// by every workload with the same labels) rather than the answer's,
	// which the write tracker would hold once per workload until the
	// cache catches up.
	if maps.Equal(written.Labels, w.Labels) {
		written.Labels = w.Labels
	}
	return written, nil
}

func (h *builtinHandler) park(ctx context.Context, w Workload, record *Original, replicas int32) (Workload, error) {
	var ann *string
	if record != nil {
		s := record.Encode()
		ann = &s
	}
	suspended := true
	return h.patch(ctx, w, mergePatch(w.ResourceVersion, ann, false, h.specFor(&replicas, &suspended)), replicas, suspended)
}

func (h *builtinHandler) restore(ctx context.Context, w Workload, orig Original) (Workload, error) {
	return h.patch(ctx, w, mergePatch(w.ResourceVersion, nil, true, h.specFor(orig.Replicas, orig.Suspend)),
		ptr.Deref(orig.Replicas, 0), ptr.Deref(orig.Suspend, false))
}

func newDeploymentHandler(a workloadAccess) *builtinHandler {
	return &builtinHandler{
		workloadAccess: a, kind: kindDeployment, gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"),
		newObj:  func() client.Object { return &appsv1.Deployment{} },
		newList: func() client.ObjectList { return &appsv1.DeploymentList{} },
		state: func(o client.Object, w *Workload) {
			w.Replicas = replicasOrDefault(o.(*appsv1.Deployment).Spec.Replicas)
		},
	}
}

func newStatefulSetHandler(a workloadAccess) *builtinHandler {
	return &builtinHandler{
		workloadAccess: a, kind: kindStatefulSet, gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		newObj:  func() client.Object { return &appsv1.StatefulSet{} },
		newList: func() client.ObjectList { return &appsv1.StatefulSetList{} },
		state: func(o client.Object, w *Workload) {
			w.Replicas = replicasOrDefault(o.(*appsv1.StatefulSet).Spec.Replicas)
		},
	}
}

func newCronJobHandler(a workloadAccess) *builtinHandler {
	return &builtinHandler{
		workloadAccess: a, kind: kindCronJob, gvk: batchv1.SchemeGroupVersion.WithKind("CronJob"),
		newObj:  func() client.Object { return &batchv1.CronJob{} },
		newList: func() client.ObjectList { return &batchv1.CronJobList{} },
		state: func(o client.Object, w *Workload) {
			w.Suspend = ptr.Deref(o.(*batchv1.CronJob).Spec.Suspend, false)
		},
	}
}

// replicasOrDefault is the apiserver's default for an unset replica count.
func replicasOrDefault(r *int32) int32 { return ptr.Deref(r, 1) }
