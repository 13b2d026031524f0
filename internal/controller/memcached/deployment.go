package memcached

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// reconcileDeployment applies the Deployment (unless it is foreign or the
// spec invalid) and records the live object for the status.
func (r *Reconciler) reconcileDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, key, dep); {
	case apierrors.IsNotFound(err):
		dep = nil
	case err != nil:
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
// object. The events tell creation, scaling and configuration rollouts
// apart, since each means something different to an operator.
func (r *Reconciler) applyDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *appsv1.Deployment, obs *observation) (*appsv1.Deployment, error) {
	desired, err := desiredDeployment(mc, s)
	if err != nil {
		return nil, err
	}
	var owned *appsv1ac.DeploymentApplyConfiguration
	if live != nil {
		if owned, err = appsv1ac.ExtractDeployment(live, r.fieldManager()); err != nil {
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
	switch {
	case live == nil:
		obs.created = append(obs.created, fmt.Sprintf("Deployment (%d instances)", s.Size))
		return after, nil
	case live.Spec.Replicas == nil || *live.Spec.Replicas != s.Size:
		from := int32(1)
		if live.Spec.Replicas != nil {
			from = *live.Spec.Replicas
		}
		r.event(mc, corev1.EventTypeNormal, EventScaled, "Scale", "Scaled Deployment %s from %d to %d instances", mc.Name, from, s.Size)
	}
	if oldHash := live.Spec.Template.Annotations[AnnotationConfigHash]; oldHash != configHash(s) {
		r.event(mc, corev1.EventTypeNormal, EventConfigRollout, "Rollout",
			"Rolling the instances of Deployment %s to configuration %s (was %q), one at a time", mc.Name, configHash(s), oldHash)
	} else if live.Spec.Replicas != nil && *live.Spec.Replicas == s.Size {
		r.event(mc, corev1.EventTypeNormal, EventDriftCorrected, "Update", "Restored the fields of Deployment %s that were changed outside the controller", mc.Name)
	}
	return after, nil
}

// desiredDeployment is the Deployment of mc as the controller applies it.
func desiredDeployment(mc *cachev1alpha1.Memcached, s settings) (*appsv1ac.DeploymentApplyConfiguration, error) {
	spec := &mc.Spec
	sel := selectorLabels(mc)
	podLabels := objectLabels(mc)

	memcached := corev1ac.Container().
		WithName(containerMemcached).
		WithImage(s.Image).
		WithArgs(memcachedArgs(s)...).
		WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.MemcachedPortName).
			WithContainerPort(cachev1alpha1.MemcachedPort).WithProtocol(corev1.ProtocolTCP)).
		WithLivenessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(cachev1alpha1.MemcachedPortName))).
			WithInitialDelaySeconds(10).WithPeriodSeconds(10).WithTimeoutSeconds(2).WithFailureThreshold(3)).
		WithReadinessProbe(corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(cachev1alpha1.MemcachedPortName))).
			WithPeriodSeconds(5).WithTimeoutSeconds(2).WithFailureThreshold(2)).
		WithSecurityContext(restrictedContainerSecurity())
	if spec.ImagePullPolicy != "" {
		memcached.WithImagePullPolicy(spec.ImagePullPolicy)
	}
	if len(spec.Resources.Limits) > 0 || len(spec.Resources.Requests) > 0 {
		r, err := convertInto(spec.Resources, &corev1ac.ResourceRequirementsApplyConfiguration{})
		if err != nil {
			return nil, fmt.Errorf("converting resources: %w", err)
		}
		memcached.WithResources(r)
	}
	containers := []*corev1ac.ContainerApplyConfiguration{memcached}
	if s.Exporter {
		exporter := corev1ac.Container().
			WithName(containerExporter).
			WithImage(s.ExporterImage).
			WithArgs(fmt.Sprintf("--memcached.address=127.0.0.1:%d", cachev1alpha1.MemcachedPort),
				fmt.Sprintf("--web.listen-address=:%d", cachev1alpha1.ExporterPort)).
			WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.ExporterPortName).
				WithContainerPort(cachev1alpha1.ExporterPort).WithProtocol(corev1.ProtocolTCP)).
			WithReadinessProbe(corev1ac.Probe().
				WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(cachev1alpha1.ExporterPortName))).
				WithPeriodSeconds(10).WithTimeoutSeconds(2)).
			WithSecurityContext(restrictedContainerSecurity())
		if spec.ImagePullPolicy != "" {
			exporter.WithImagePullPolicy(spec.ImagePullPolicy)
		}
		if e := spec.Exporter; len(e.Resources.Limits) > 0 || len(e.Resources.Requests) > 0 {
			r, err := convertInto(e.Resources, &corev1ac.ResourceRequirementsApplyConfiguration{})
			if err != nil {
				return nil, fmt.Errorf("converting exporter resources: %w", err)
			}
			exporter.WithResources(r)
		}
		containers = append(containers, exporter)
	}

	pod := corev1ac.PodSpec().
		WithContainers(containers...).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			// 11211 is the memcache user of the official image.
			WithRunAsUser(11211).
			WithRunAsGroup(11211).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	if len(spec.NodeSelector) > 0 {
		pod.WithNodeSelector(spec.NodeSelector)
	}
	for i := range spec.Tolerations {
		t, err := convertInto(spec.Tolerations[i], &corev1ac.TolerationApplyConfiguration{})
		if err != nil {
			return nil, fmt.Errorf("converting toleration %d: %w", i, err)
		}
		pod.WithTolerations(t)
	}
	aff, err := desiredAffinity(mc, sel)
	if err != nil {
		return nil, err
	}
	if aff != nil {
		pod.WithAffinity(aff)
	}
	for i := range spec.TopologySpreadConstraints {
		c := spec.TopologySpreadConstraints[i].DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: maps.Clone(sel)}
		}
		t, err := convertInto(c, &corev1ac.TopologySpreadConstraintApplyConfiguration{})
		if err != nil {
			return nil, fmt.Errorf("converting topology spread constraint %d: %w", i, err)
		}
		pod.WithTopologySpreadConstraints(t)
	}
	if spec.PriorityClassName != "" {
		pod.WithPriorityClassName(spec.PriorityClassName)
	}

	dspec := appsv1ac.DeploymentSpec().
		WithReplicas(s.Size).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
		// Never more than size instances, not even during a rollout: one
		// instance at a time is replaced, each one a cold cache.
		WithStrategy(appsv1ac.DeploymentStrategy().
			WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxSurge(intstr.FromInt32(0)).
				WithMaxUnavailable(intstr.FromInt32(1)))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels).
			WithAnnotations(map[string]string{AnnotationConfigHash: configHash(s)}).
			WithSpec(pod))
	if spec.MinReadySeconds > 0 {
		dspec.WithMinReadySeconds(spec.MinReadySeconds)
	}
	return appsv1ac.Deployment(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(dspec), nil
}

// desiredAffinity merges the user's affinity with the anti-affinity preset.
func desiredAffinity(mc *cachev1alpha1.Memcached, sel map[string]string) (*corev1ac.AffinityApplyConfiguration, error) {
	spec := &mc.Spec
	var aff *corev1ac.AffinityApplyConfiguration
	if spec.Affinity != nil && (spec.Affinity.NodeAffinity != nil || spec.Affinity.PodAffinity != nil || spec.Affinity.PodAntiAffinity != nil) {
		a, err := convertInto(spec.Affinity, &corev1ac.AffinityApplyConfiguration{})
		if err != nil {
			return nil, fmt.Errorf("converting affinity: %w", err)
		}
		aff = a
	}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		return aff, nil
	}
	preset := spec.AntiAffinity
	if preset == "" {
		preset = cachev1alpha1.AntiAffinitySoft
	}
	term := corev1ac.PodAffinityTerm().
		WithTopologyKey(corev1.LabelHostname).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(sel))
	switch preset {
	case cachev1alpha1.AntiAffinitySoft:
		if aff == nil {
			aff = corev1ac.Affinity()
		}
		aff.WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(
			corev1ac.WeightedPodAffinityTerm().WithWeight(100).WithPodAffinityTerm(term)))
	case cachev1alpha1.AntiAffinityHard:
		if aff == nil {
			aff = corev1ac.Affinity()
		}
		aff.WithPodAntiAffinity(corev1ac.PodAntiAffinity().WithRequiredDuringSchedulingIgnoredDuringExecution(term))
	}
	return aff, nil
}
