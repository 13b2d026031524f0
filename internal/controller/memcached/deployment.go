package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// deploymentWorkload is the Deployment for reconcileOwnedWorkload.
var deploymentWorkload = ownedWorkload[appsv1.Deployment, *appsv1.Deployment]{
	kind: "Deployment",
	desired: func(mc *cachev1alpha1.Memcached, s settings) (runtime.ApplyConfiguration, error) {
		return desiredDeployment(mc, s)
	},
	extract: func(live *appsv1.Deployment) (any, error) { return appsv1ac.ExtractDeployment(live, FieldManager) },
	state:   deploymentState,
	pods: func(live *appsv1.Deployment) (*int32, *corev1.PodTemplateSpec) {
		return live.Spec.Replicas, &live.Spec.Template
	},
}

// desiredDeployment is the Deployment of mc as the controller applies it.
func desiredDeployment(mc *cachev1alpha1.Memcached, s settings) (*appsv1ac.DeploymentApplyConfiguration, error) {
	template, err := desiredPodTemplate(mc, s)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithReplicas(s.Size).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
		// Never more than size instances, not even during a rollout: one
		// instance at a time is replaced, each one a cold cache.
		WithStrategy(appsv1ac.DeploymentStrategy().
			WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxSurge(intstr.FromInt32(0)).
				WithMaxUnavailable(intstr.FromInt32(1)))).
		WithTemplate(template)
	if mc.Spec.MinReadySeconds > 0 {
		spec.WithMinReadySeconds(mc.Spec.MinReadySeconds)
	}
	return appsv1ac.Deployment(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(spec), nil
}

// desiredPodTemplate is the pod template of either workload kind: the
// pod labels (the selector's always win), the hash annotations, the pod.
func desiredPodTemplate(mc *cachev1alpha1.Memcached, s settings) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	pod, err := desiredPodSpec(mc, s)
	if err != nil {
		return nil, err
	}
	return corev1ac.PodTemplateSpec().
		WithLabels(podLabels(mc)).
		WithAnnotations(podAnnotations(mc, s)).
		WithSpec(pod), nil
}

// reportWorkloadChange tells scaling, configuration rollouts, Secret
// rotations and drift corrections of an applied workload apart (the
// replicas and template annotations are from before the apply), since
// each means something different to an operator.
func (r *Reconciler) reportWorkloadChange(mc *cachev1alpha1.Memcached, obs *observation, s settings, kind string, replicas *int32, annotations map[string]string) {
	scaled := replicas == nil || *replicas != s.Size
	if scaled {
		from := int32(1) // the workload's default
		if replicas != nil {
			from = *replicas
		}
		obs.events.Normal(mc, nil, cachev1alpha1.EventScaled, "Scale", "Scaled %s %s from %d to %d instances", kind, mc.Name, from, s.Size)
	}
	newHash := configHash(s, &mc.Spec.PodOverrides)
	oldHash := annotations[AnnotationConfigHash]
	rotated := annotations[AnnotationSecretHash] != s.SecretHash
	switch {
	case oldHash != newHash:
		r.Metrics.rollout(rolloutConfig)
		obs.events.Normal(mc, nil, cachev1alpha1.EventConfigRollout, "Rollout",
			"Rolling the instances of %s %s to configuration %s (was %q), one at a time", kind, mc.Name, newHash, oldHash)
	case rotated:
		r.Metrics.rollout(rolloutSecret)
		obs.events.Normal(mc, nil, cachev1alpha1.EventSecretRotated, "Rollout",
			"Rolling the instances of %s %s one at a time: the data of its TLS or auth Secret changed", kind, mc.Name)
	case !scaled:
		obs.events.Normal(mc, nil, cachev1alpha1.EventDriftCorrected, "Update", "Restored the fields of %s %s that were changed outside the controller", kind, mc.Name)
	}
}
