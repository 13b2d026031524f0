package nsscaler

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/runbook-dev/runbook/internal/savings"
)

// cachedWorkload is what the workload cache holds of a Deployment,
// StatefulSet or CronJob: its trimmed metadata and the one field the
// controller decides on. Even trimmed, an appsv1.Deployment is a 1,232-byte
// struct (its empty pod template included), three quarters of what a cached
// workload cost; this one is a quarter of that. The cache's typed reads of
// these kinds (Get, List) fail with a type error instead: the controller
// reads them from the informers' stores (workloadAccess.cachedObjects) and
// from the events of its watches, which need only metav1.Object.
type cachedWorkload struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Replicas is spec.replicas with the apiserver's default applied
	// (Deployments, StatefulSets); Suspend is a CronJob's spec.suspend.
	Replicas int32
	Suspend  bool
	// Requests are one pod's effective requests, computed from the pod
	// template before the transform dropped it.
	Requests savings.Requests
}

// DeepCopyObject implements runtime.Object.
func (c *cachedWorkload) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// compactWorkload turns a trimmed built-in workload into a cachedWorkload
// with requests, the effective requests of one of its pods (read before the
// trim); anything else (a custom resource, a namespace, an object already
// compacted: a transform must accept its own output) is returned as is.
func compactWorkload(o any, requests savings.Requests) any {
	var c *cachedWorkload
	switch obj := o.(type) {
	case *appsv1.Deployment:
		c = &cachedWorkload{TypeMeta: obj.TypeMeta, ObjectMeta: obj.ObjectMeta, Replicas: replicasOrDefault(obj.Spec.Replicas), Requests: requests}
	case *appsv1.StatefulSet:
		c = &cachedWorkload{TypeMeta: obj.TypeMeta, ObjectMeta: obj.ObjectMeta, Replicas: replicasOrDefault(obj.Spec.Replicas), Requests: requests}
	case *batchv1.CronJob:
		c = &cachedWorkload{TypeMeta: obj.TypeMeta, ObjectMeta: obj.ObjectMeta, Suspend: ptr.Deref(obj.Spec.Suspend, false)}
	default:
		return o
	}
	return c
}
