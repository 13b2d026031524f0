package memcached

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// AnnotationConfigHash on the pod template identifies the memcached
// configuration the pods run; a new value rolls the pods.
const AnnotationConfigHash = "cache.runbook.dev/config-hash"

// reconcileDeployment applies the Deployment (unless it is foreign or the
// spec invalid) and records the live object for the status.
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
			obs.deployment = dep
			return fmt.Errorf("applying Deployment %s: %w", key, err)
		}
		obs.deployment = live
	default:
		obs.deployment = dep
	}
	return nil
}

// applyDeployment applies the desired Deployment and returns the live
// object.
func (r *Reconciler) applyDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *appsv1.Deployment, obs *observation) (*appsv1.Deployment, error) {
	desired, err := desiredDeployment(mc, s)
	if err != nil {
		return nil, err
	}
	var owned *appsv1ac.DeploymentApplyConfiguration
	if live != nil {
		if owned, err = appsv1ac.ExtractDeployment(live, FieldManager); err != nil {
			return nil, fmt.Errorf("extracting owned fields: %w", err)
		}
	}
	applied, err := r.applyIfChanged(ctx, desired, owned)
	if err != nil || !applied {
		return live, err
	}
	// The apply response (the new live object) was decoded into desired.
	after, err := convertInto(desired, &appsv1.Deployment{})
	if err != nil {
		return nil, fmt.Errorf("decoding the apply response: %w", err)
	}
	if live == nil {
		obs.created = append(obs.created, fmt.Sprintf("Deployment (%d instances)", s.Size))
		return after, nil
	}
	r.reportDeploymentChange(mc, s, live)
	return after, nil
}

// reportDeploymentChange tells scaling, configuration rollouts and drift
// corrections of an applied Deployment apart (live: before the apply),
// since each means something different to an operator.
func (r *Reconciler) reportDeploymentChange(mc *cachev1alpha1.Memcached, s settings, live *appsv1.Deployment) {
	scaled := live.Spec.Replicas == nil || *live.Spec.Replicas != s.Size
	if scaled {
		from := int32(1) // the Deployment's default
		if live.Spec.Replicas != nil {
			from = *live.Spec.Replicas
		}
		r.Events.Normal(mc, nil, cachev1alpha1.EventScaled, "Scale", "Scaled Deployment %s from %d to %d instances", mc.Name, from, s.Size)
	}
	switch oldHash := live.Spec.Template.Annotations[AnnotationConfigHash]; {
	case oldHash != configHash(s):
		r.Events.Normal(mc, nil, cachev1alpha1.EventConfigRollout, "Rollout",
			"Rolling the instances of Deployment %s to configuration %s (was %q), one at a time", mc.Name, configHash(s), oldHash)
	case !scaled:
		r.Events.Normal(mc, nil, cachev1alpha1.EventDriftCorrected, "Update", "Restored the fields of Deployment %s that were changed outside the controller", mc.Name)
	}
}

// desiredDeployment is the Deployment of mc as the controller applies it.
func desiredDeployment(mc *cachev1alpha1.Memcached, s settings) (*appsv1ac.DeploymentApplyConfiguration, error) {
	pod, err := desiredPodSpec(mc, s)
	if err != nil {
		return nil, err
	}
	return appsv1ac.Deployment(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(desiredDeploymentSpec(mc, s, pod)), nil
}

func desiredDeploymentSpec(mc *cachev1alpha1.Memcached, s settings, pod *corev1ac.PodSpecApplyConfiguration) *appsv1ac.DeploymentSpecApplyConfiguration {
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
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(objectLabels(mc)).
			WithAnnotations(map[string]string{AnnotationConfigHash: configHash(s)}).
			WithSpec(pod))
	if mc.Spec.MinReadySeconds > 0 {
		spec.WithMinReadySeconds(mc.Spec.MinReadySeconds)
	}
	return spec
}
