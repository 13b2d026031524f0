package nsscaler

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/savings"
)

// newWorkloadCache builds the controller's own informer cache for namespaces,
// workloads and pod metadata. It keeps only what the controller reads —
// metadata without managedFields, and the workloads' specs without their pod
// templates — so that thousands of Deployments cost little memory. Writes
// never start from these trimmed copies: they are JSON merge patches of two
// fields.
//
// onWatchError hears of every failed list or watch of its informers (after
// the default handler logged it), so that a run-time kind the manager may
// not read is given up at once (dynamicKinds.watchFailed). A read of a kind
// without an informer fails instead of starting one that might never sync.
func newWorkloadCache(mgr ctrl.Manager, onWatchError func(typeDescription string, err error)) (cache.Cache, error) {
	trim := trimAndShareMaps(newMapInterner(), newMapInterner())
	c, err := cache.New(protobufConfig(mgr), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		ReaderFailOnMissingInformer: true,
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
			onWatchError(r.TypeDescription(), err)
		},
		DefaultTransform: trim,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:  {Transform: trim},
			&appsv1.StatefulSet{}: {Transform: trim},
			&batchv1.CronJob{}:    {Transform: trim},
			&corev1.Namespace{}:   {Transform: trim},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the nsscaler workload cache: %w", err)
	}
	// Registered as a cache, so the manager starts and syncs it before the
	// controllers.
	if err := mgr.Add(status.ManagedCache{Cache: c}); err != nil {
		return nil, fmt.Errorf("adding the nsscaler workload cache: %w", err)
	}
	return c, nil
}

// trimAndShareMaps is the cache transform: trimObject, then the labels and
// the kept annotations of the built-in workloads shared with every other
// workload that has the same (custom resources keep theirs inside their
// unstructured content, which the setters copy: nothing to share there),
// then the compact cached form.
func trimAndShareMaps(labels, annotations *mapInterner) toolscache.TransformFunc {
	return func(o any) (any, error) {
		requests := podRequestsOf(o)
		out, err := trimObject(o)
		if err != nil {
			return out, err
		}
		switch obj := out.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet, *batchv1.CronJob:
			m := obj.(metav1.Object)
			m.SetLabels(labels.share(m.GetLabels()))
			m.SetAnnotations(annotations.share(m.GetAnnotations()))
		}
		return compactWorkload(out, requests), nil
	}
}

// podRequestsOf is the effective requests of one pod of a Deployment or
// StatefulSet (zero for anything else: a CronJob's pods come and go, a
// custom resource's template is not known).
func podRequestsOf(o any) savings.Requests {
	switch obj := o.(type) {
	case *appsv1.Deployment:
		return savings.PodRequests(&obj.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		return savings.PodRequests(&obj.Spec.Template.Spec)
	}
	return savings.Requests{}
}

// trimObject keeps of each object only what the controller reads.
// Workloads keep their replicas or suspend flag, owner references, labels (for excludeSelector) and this controller's own
// annotations (not, e.g., a kubectl last-applied-configuration, which copies
// the whole object); namespaces keep their labels; pods (metadata only) keep
// their identity; ScaledObjects their target and KEDA's pause annotation.
// What a workload's editors control is bounded here, before it is held in
// memory: annotation values beyond what a valid one needs are cut (and then
// fail to parse: reported, not acted on), and a workload with more than
// maxWorkloadLabels labels keeps none but a marker.
func trimObject(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	switch obj := o.(type) {
	case *appsv1.Deployment:
		keepOwnMetadata(obj)
		obj.Spec = appsv1.DeploymentSpec{Replicas: obj.Spec.Replicas}
		obj.Status = appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		keepOwnMetadata(obj)
		obj.Spec = appsv1.StatefulSetSpec{Replicas: obj.Spec.Replicas}
		obj.Status = appsv1.StatefulSetStatus{}
	case *batchv1.CronJob:
		keepOwnMetadata(obj)
		obj.Spec = batchv1.CronJobSpec{Suspend: obj.Spec.Suspend}
		obj.Status = batchv1.CronJobStatus{}
	case *corev1.Namespace:
		obj.Annotations = nil
		obj.Spec = corev1.NamespaceSpec{}
		obj.Status = corev1.NamespaceStatus{}
	case *metav1.PartialObjectMetadata:
		obj.Labels = nil
		obj.Annotations = nil
		obj.OwnerReferences = nil
		obj.Finalizers = nil
	case *unstructured.Unstructured:
		trimCustomResource(obj)
	}
	return o, nil
}

// trimCustomResource: a custom resource keeps its spec (the replica path is
// only known per kind, and is always under .spec), not its status; a
// ScaledObject only its scaleTargetRef.
func trimCustomResource(u *unstructured.Unstructured) {
	keepOwnMetadata(u)
	delete(u.Object, "status")
	if u.GroupVersionKind().GroupKind() != scaledObjectGVK.GroupKind() {
		return
	}
	ref, found, _ := unstructured.NestedMap(u.Object, "spec", "scaleTargetRef")
	u.Object["spec"] = map[string]any{}
	if found {
		u.Object["spec"] = map[string]any{"scaleTargetRef": ref}
	}
}

// ownAnnotations are the annotations the controller reads, with the length
// beyond which a value cannot be valid.
var ownAnnotations = map[string]int{
	AnnotationOriginal:           maxOriginalLength,
	AnnotationExclude:            maxExclusionValue,
	AnnotationExcludeUntil:       maxExclusionValue,
	AnnotationKEDAPausedReplicas: maxExclusionValue,
	AnnotationArgoCDTrackingID:   maxTrackingIDLength,
}

// keepOwnMetadata drops every annotation but the controller's own (values
// cut one byte past their bound, so that they fail to parse) and bounds the
// labels.
func keepOwnMetadata(m metav1.Object) {
	var kept map[string]string
	for k, v := range m.GetAnnotations() {
		limit, own := ownAnnotations[k]
		if !own {
			continue
		}
		if len(v) > limit {
			v = v[:limit+1]
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[k] = v
	}
	m.SetAnnotations(kept)
	if len(m.GetLabels()) > maxWorkloadLabels {
		m.SetLabels(map[string]string{labelsTrimmed: ""})
	}
}

// podMetadata is the object the pod watch and list use: metadata only.
func podMetadata() *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return p
}
