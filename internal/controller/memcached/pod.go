package memcached

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

const (
	containerMemcached = "memcached"
	containerExporter  = "exporter"

	// memcacheUID is the memcache user (and group) of the official image.
	memcacheUID = 11211
)

// desiredPodSpec is the pod of every instance: restricted-compliant (no
// root, no token, no privilege), placed as the spec asks.
func desiredPodSpec(mc *cachev1alpha1.Memcached, s settings) (*corev1ac.PodSpecApplyConfiguration, error) {
	containers, err := desiredContainers(&mc.Spec, s)
	if err != nil {
		return nil, err
	}
	pod := corev1ac.PodSpec().
		WithContainers(containers...).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(memcacheUID).
			WithRunAsGroup(memcacheUID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	if err := placePod(pod, mc); err != nil {
		return nil, err
	}
	return pod, nil
}

// desiredContainers: memcached, and the exporter sidecar when enabled.
func desiredContainers(spec *cachev1alpha1.MemcachedSpec, s settings) ([]*corev1ac.ContainerApplyConfiguration, error) {
	memcached := memcachedContainer(s)
	if err := withPullAndResources(memcached, spec.ImagePullPolicy, spec.Resources, "resources"); err != nil {
		return nil, err
	}
	if !s.Exporter {
		return []*corev1ac.ContainerApplyConfiguration{memcached}, nil
	}
	exporter := exporterContainer(s)
	if err := withPullAndResources(exporter, spec.ImagePullPolicy, spec.Exporter.Resources, "exporter resources"); err != nil {
		return nil, err
	}
	return []*corev1ac.ContainerApplyConfiguration{memcached, exporter}, nil
}

func memcachedContainer(s settings) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(containerMemcached).
		WithImage(s.Image).
		WithArgs(memcachedArgs(s)...).
		WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.MemcachedPortName).
			WithContainerPort(cachev1alpha1.MemcachedPort).WithProtocol(corev1.ProtocolTCP)).
		WithLivenessProbe(tcpProbe(cachev1alpha1.MemcachedPortName).
			WithInitialDelaySeconds(10).WithPeriodSeconds(10).WithTimeoutSeconds(2).WithFailureThreshold(3)).
		WithReadinessProbe(tcpProbe(cachev1alpha1.MemcachedPortName).
			WithPeriodSeconds(5).WithTimeoutSeconds(2).WithFailureThreshold(2)).
		WithSecurityContext(restrictedContainerSecurity())
}

func exporterContainer(s settings) *corev1ac.ContainerApplyConfiguration {
	return corev1ac.Container().
		WithName(containerExporter).
		WithImage(s.ExporterImage).
		WithArgs(fmt.Sprintf("--memcached.address=127.0.0.1:%d", cachev1alpha1.MemcachedPort),
			fmt.Sprintf("--web.listen-address=:%d", cachev1alpha1.ExporterPort)).
		WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.ExporterPortName).
			WithContainerPort(cachev1alpha1.ExporterPort).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(tcpProbe(cachev1alpha1.ExporterPortName).
			WithPeriodSeconds(10).WithTimeoutSeconds(2)).
		WithSecurityContext(restrictedContainerSecurity())
}

// withPullAndResources sets the user's pull policy and resources on c, only
// when the spec sets them: unset, the apiserver's defaults apply. what names
// the resources in errors.
func withPullAndResources(c *corev1ac.ContainerApplyConfiguration, pull corev1.PullPolicy, res corev1.ResourceRequirements, what string) error {
	if pull != "" {
		c.WithImagePullPolicy(pull)
	}
	if len(res.Limits) == 0 && len(res.Requests) == 0 {
		return nil
	}
	r, err := convertInto(res, &corev1ac.ResourceRequirementsApplyConfiguration{})
	if err != nil {
		return fmt.Errorf("converting %s: %w", what, err)
	}
	c.WithResources(r)
	return nil
}

func tcpProbe(port string) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(port)))
}

func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
}
