package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch

// statefulSetWorkload is the StatefulSet for reconcileOwnedWorkload.
var statefulSetWorkload = ownedWorkload[appsv1.StatefulSet, *appsv1.StatefulSet]{
	kind: "StatefulSet",
	desired: func(mc *cachev1alpha1.Memcached, s settings) (runtime.ApplyConfiguration, error) {
		return desiredStatefulSet(mc, s)
	},
	extract: func(live *appsv1.StatefulSet) (any, error) { return appsv1ac.ExtractStatefulSet(live, FieldManager) },
	state:   statefulSetState,
	pods: func(live *appsv1.StatefulSet) (*int32, *corev1.PodTemplateSpec) {
		return live.Spec.Replicas, &live.Spec.Template
	},
}

// desiredStatefulSet gives each instance a stable name,
// <name>-<ordinal>.<name>.<namespace>.svc, through the headless Service.
// Instances start and stop in parallel (a cache's instances do not depend
// on each other); a rollout replaces one at a time, highest ordinal first,
// so there are never more than size instances.
func desiredStatefulSet(mc *cachev1alpha1.Memcached, s settings) (*appsv1ac.StatefulSetApplyConfiguration, error) {
	template, err := desiredPodTemplate(mc, s)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.StatefulSetSpec().
		WithReplicas(s.Size).
		WithServiceName(mc.Name).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
		WithPodManagementPolicy(appsv1.ParallelPodManagement).
		WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
		WithTemplate(template)
	if mc.Spec.MinReadySeconds > 0 {
		spec.WithMinReadySeconds(mc.Spec.MinReadySeconds)
	}
	return appsv1ac.StatefulSet(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(spec), nil
}
