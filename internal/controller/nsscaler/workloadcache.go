package nsscaler

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newWorkloadCache builds the controller's own informer cache for namespaces,
// workloads and pod metadata. It keeps only what the controller reads —
// metadata without managedFields, and the workloads' specs without their pod
// templates — so that thousands of Deployments cost little memory. Writes
// never start from these trimmed copies: they are JSON merge patches of two
// fields.
func newWorkloadCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(protobufConfig(mgr), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: trimObject,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:  {Transform: trimObject},
			&appsv1.StatefulSet{}: {Transform: trimObject},
			&batchv1.CronJob{}:    {Transform: trimObject},
			&corev1.Namespace{}:   {Transform: trimObject},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the nsscaler workload cache: %w", err)
	}
	// Registered as a cache, so the manager starts and syncs it before the
	// controllers.
	if err := mgr.Add(managedCache{c}); err != nil {
		return nil, fmt.Errorf("adding the nsscaler workload cache: %w", err)
	}
	return c, nil
}

// managedCache makes the manager treat the cache as one of its caches.
type managedCache struct{ cache.Cache }

func (m managedCache) GetCache() cache.Cache { return m.Cache }

// trimObject is the cache transform: it keeps of each object only what the
// controller reads. Workloads keep their replicas or suspend flag, owner
// references and the original annotation (not, e.g., a kubectl
// last-applied-configuration, which copies the whole object); namespaces keep
// their labels; pods (metadata only) keep their identity.
func trimObject(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	switch obj := o.(type) {
	case *appsv1.Deployment:
		keepOnlyOriginal(obj)
		obj.Labels = nil
		obj.Spec = appsv1.DeploymentSpec{Replicas: obj.Spec.Replicas}
		obj.Status = appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		keepOnlyOriginal(obj)
		obj.Labels = nil
		obj.Spec = appsv1.StatefulSetSpec{Replicas: obj.Spec.Replicas}
		obj.Status = appsv1.StatefulSetStatus{}
	case *batchv1.CronJob:
		keepOnlyOriginal(obj)
		obj.Labels = nil
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
		// Custom resources keep their spec: the replica path is only known
		// per kind.
		keepOnlyOriginal(obj)
	}
	return o, nil
}

// keepOnlyOriginal drops every annotation but the controller's own.
func keepOnlyOriginal(m metav1.Object) {
	v, ok := m.GetAnnotations()[AnnotationOriginal]
	if !ok {
		m.SetAnnotations(nil)
		return
	}
	m.SetAnnotations(map[string]string{AnnotationOriginal: v})
}

// podMetadata is the object the pod watch and list use: metadata only.
func podMetadata() *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return p
}
