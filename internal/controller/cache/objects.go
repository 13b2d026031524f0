package cache

import (
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Labels and annotations the controller writes.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"
	managedByValue = "runbook"
	nameValue      = "memcached"

	// AnnotationConfigHash on the pod template identifies the memcached
	// configuration the pods run; a new value rolls the pods.
	AnnotationConfigHash = "cache.runbook.dev/config-hash"

	containerMemcached = "memcached"
	containerExporter  = "exporter"
)

// selectorLabels select the pods of one Memcached: unique per object within
// its namespace, so two caches never share pods, Service endpoints or a PDB.
func selectorLabels(mc *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{
		labelName:      nameValue,
		labelInstance:  mc.Name,
		labelManagedBy: managedByValue,
	}
}

// objectLabels are put on every object the controller owns.
func objectLabels(mc *cachev1alpha1.Memcached) map[string]string {
	l := selectorLabels(mc)
	l[labelComponent] = "cache"
	return l
}

// selectorString is the status.selector of the scale subresource.
func selectorString(mc *cachev1alpha1.Memcached) string {
	return labels.SelectorFromSet(selectorLabels(mc)).String()
}

func ownerReference(mc *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// convertInto copies a typed API value into its apply configuration. Both
// share one JSON shape, so a JSON round trip is exact.
func convertInto[T any](in any, out *T) (*T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
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

// desiredService is the headless Service that resolves to the ready
// instances (clients and status.servers use its EndpointSlices).
func desiredService(mc *cachev1alpha1.Memcached, s settings) *corev1ac.ServiceApplyConfiguration {
	ports := []*corev1ac.ServicePortApplyConfiguration{
		corev1ac.ServicePort().WithName(cachev1alpha1.MemcachedPortName).WithProtocol(corev1.ProtocolTCP).
			WithPort(cachev1alpha1.MemcachedPort).WithTargetPort(intstr.FromString(cachev1alpha1.MemcachedPortName)),
	}
	if s.Exporter {
		ports = append(ports, corev1ac.ServicePort().WithName(cachev1alpha1.ExporterPortName).WithProtocol(corev1.ProtocolTCP).
			WithPort(cachev1alpha1.ExporterPort).WithTargetPort(intstr.FromString(cachev1alpha1.ExporterPortName)))
	}
	svc := corev1ac.Service(mc.Name, mc.Namespace)
	if s.ServiceMonitor {
		svc.WithAnnotations(map[string]string{AnnotationServiceMonitor: "true"})
	}
	return svc.
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			// Only ready instances are published (publishNotReadyAddresses
			// stays false, its default; a false bool cannot be read back
			// from the managed fields, so it is not set explicitly).
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(selectorLabels(mc)).
			WithPorts(ports...))
}

// desiredPDB is the PodDisruptionBudget of mc. Unhealthy instances may
// always be evicted: they serve nothing, and blocking a node drain on them
// helps no one.
func desiredPDB(mc *cachev1alpha1.Memcached, s settings) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(s.PDBMaxUnavail).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc))).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}
