package scaling

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
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
	strip := cache.TransformStripManagedFields()
	c, err := cache.New(protobufConfig(mgr), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: strip,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Transform: chain(strip, func(o any) (any, error) {
				if d, ok := o.(*appsv1.Deployment); ok {
					d.Spec.Template = corev1.PodTemplateSpec{}
					d.Status = appsv1.DeploymentStatus{}
				}
				return o, nil
			})},
			&appsv1.StatefulSet{}: {Transform: chain(strip, func(o any) (any, error) {
				if s, ok := o.(*appsv1.StatefulSet); ok {
					s.Spec.Template = corev1.PodTemplateSpec{}
					s.Spec.VolumeClaimTemplates = nil
					s.Status = appsv1.StatefulSetStatus{}
				}
				return o, nil
			})},
			&batchv1.CronJob{}: {Transform: chain(strip, func(o any) (any, error) {
				if cj, ok := o.(*batchv1.CronJob); ok {
					cj.Spec.JobTemplate = batchv1.JobTemplateSpec{}
					cj.Status = batchv1.CronJobStatus{}
				}
				return o, nil
			})},
			&corev1.Namespace{}: {Transform: chain(strip, func(o any) (any, error) {
				if ns, ok := o.(*corev1.Namespace); ok {
					ns.Annotations = nil
					ns.Spec = corev1.NamespaceSpec{}
					ns.Status = corev1.NamespaceStatus{}
				}
				return o, nil
			})},
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

// protobufConfig is the manager's config asking for protobuf, which the
// built-in kinds speak: cheaper to encode in the apiserver and to decode here
// than JSON. Custom resources fall back to JSON automatically.
func protobufConfig(mgr ctrl.Manager) *rest.Config {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// newWorkloadWriter is the client for workload patches: the manager's HTTP
// client and mapper, protobuf responses.
func newWorkloadWriter(mgr ctrl.Manager) (client.Client, error) {
	c, err := client.New(protobufConfig(mgr), client.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("building the nsscaler workload client: %w", err)
	}
	return c, nil
}

// managedCache makes the manager treat the cache as one of its caches.
type managedCache struct{ cache.Cache }

func (m managedCache) GetCache() cache.Cache { return m.Cache }

func chain(fs ...toolscache.TransformFunc) toolscache.TransformFunc {
	return func(o any) (any, error) {
		var err error
		for _, f := range fs {
			if o, err = f(o); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
}

// podMetadata is the object the pod watch and list use: metadata only.
func podMetadata() *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return p
}
