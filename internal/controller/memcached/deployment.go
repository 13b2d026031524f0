package memcached

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// reconcileDeployment applies the Deployment (unless it is foreign or the
// spec may not be applied) and records the live object for the status.
func (r *Reconciler) reconcileDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	dep, err := getLive(ctx, r.Client, key, &appsv1.Deployment{})
	if err != nil {
		return fmt.Errorf("reading Deployment %s: %w", key, err)
	}
	switch {
	case dep != nil && !metav1.IsControlledBy(dep, mc):
		obs.foreign = append(obs.foreign, describeForeign("Deployment", dep, mc))
	case apply:
		live, err := r.applyDeployment(ctx, mc, s, dep, obs)
		if err != nil {
			obs.workload = deploymentState(dep)
			return fmt.Errorf("applying Deployment %s: %w", key, err)
		}
		obs.workload = deploymentState(live)
	default:
		obs.workload = deploymentState(dep)
	}
	return nil
}

// applyDeployment applies the desired Deployment and returns the live
// object.
func (r *Reconciler) applyDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *appsv1.Deployment, obs *observation) (*appsv1.Deployment, error) {
	var cached client.Object
	if live != nil {
		cached = live
	}
	after := &appsv1.Deployment{}
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), func() (runtime.ApplyConfiguration, error) { return desiredDeployment(mc, s) }, cached, after, func() (any, error) { return appsv1ac.ExtractDeployment(live, FieldManager) })
	if err != nil || !applied {
		return live, err
	}
	if live == nil {
		obs.created = append(obs.created, fmt.Sprintf("Deployment (%d instances)", s.Size))
		return after, nil
	}
	noteSecretRollout(obs, live.Spec.Template.Annotations, s)
	r.reportWorkloadChange(mc, obs, s, "Deployment", live.Spec.Replicas, live.Spec.Template.Annotations)
	return after, nil
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
