package reloadercompat

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Kinds are the workload kinds the compatibility mode handles.
var Kinds = []autorebootv1alpha1.TargetKind{
	autorebootv1alpha1.KindDeployment, autorebootv1alpha1.KindStatefulSet, autorebootv1alpha1.KindDaemonSet,
}

func newWorkload(kind autorebootv1alpha1.TargetKind) client.Object {
	switch kind {
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}
	default:
		return &appsv1.Deployment{}
	}
}

func newWorkloadList(kind autorebootv1alpha1.TargetKind) client.ObjectList {
	switch kind {
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSetList{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSetList{}
	default:
		return &appsv1.DeploymentList{}
	}
}

// templateOf is the workload's pod template.
func templateOf(obj client.Object) *corev1.PodTemplateSpec {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template
	case *appsv1.StatefulSet:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	}
	return &corev1.PodTemplateSpec{}
}

// annotated: the workload or its template carries an annotation of
// Reloader's that asks for restarts.
func annotated(obj client.Object) bool {
	return readRules(obj.GetAnnotations(), templateOf(obj).Annotations).any()
}
