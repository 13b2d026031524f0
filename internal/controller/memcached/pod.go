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
// root, no token, no privilege), placed as the spec asks, with the TLS,
// auth and extra volumes and the pod overrides.
func desiredPodSpec(mc *cachev1alpha1.Memcached, s settings) (*corev1ac.PodSpecApplyConfiguration, error) {
	containers, err := desiredContainers(&mc.Spec, s)
	if err != nil {
		return nil, err
	}
	volumes, err := desiredVolumes(&mc.Spec, s)
	if err != nil {
		return nil, err
	}
	security := corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithRunAsUser(memcacheUID).
		WithRunAsGroup(memcacheUID).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	initContainers, err := extraInitContainers(&mc.Spec)
	if err != nil {
		return nil, err
	}
	pod := corev1ac.PodSpec().
		WithInitContainers(initContainers...).
		WithContainers(containers...).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false)
	if len(volumes) > 0 {
		// The group of the mounted files and volumes, so that memcache
		// (not root) can read the Secrets' files and write extstore.
		security.WithFSGroup(memcacheUID).WithFSGroupChangePolicy(corev1.FSGroupChangeOnRootMismatch)
		pod.WithVolumes(volumes...)
	}
	withPodSecurity(security, mc.Spec.PodSecurityContext)
	if p := mc.Spec.PodSecurityContext; p != nil && p.HostUsers != nil {
		pod.WithHostUsers(*p.HostUsers)
	}
	pod.WithSecurityContext(security)
	applyPodOverrides(pod, &mc.Spec.PodOverrides)
	withWarmRestartPod(pod, s)
	if err := placePod(pod, mc); err != nil {
		return nil, err
	}
	return pod, nil
}

// desiredVolumes: the TLS files, the auth file, the extra volumes.
func desiredVolumes(spec *cachev1alpha1.MemcachedSpec, s settings) ([]*corev1ac.VolumeApplyConfiguration, error) {
	var out []*corev1ac.VolumeApplyConfiguration
	if s.TLS != nil {
		out = append(out, tlsVolume(s.TLS))
	}
	if s.Auth != nil {
		out = append(out, authVolume(s.Auth))
	}
	if s.WarmRestart {
		out = append(out, warmRestartVolume(s))
	}
	extra, err := extraVolumes(spec.ExtraVolumes)
	if err != nil {
		return nil, err
	}
	return append(out, extra...), nil
}

// desiredContainers: memcached, the exporter sidecar when enabled, the TLS
// agent with TLS.
func desiredContainers(spec *cachev1alpha1.MemcachedSpec, s settings) ([]*corev1ac.ContainerApplyConfiguration, error) {
	memcached := memcachedContainer(spec, s)
	if err := withPullAndResources(memcached, spec.ImagePullPolicy, memcachedResources(spec.Resources, s), "resources"); err != nil {
		return nil, err
	}
	out := []*corev1ac.ContainerApplyConfiguration{memcached}
	if s.Exporter {
		exporter := exporterContainer(s)
		if err := withPullAndResources(exporter, spec.ImagePullPolicy, spec.Exporter.Resources, "exporter resources"); err != nil {
			return nil, err
		}
		out = append(out, exporter)
	}
	if s.TLS != nil {
		agent := tlsAgentContainer(s)
		if spec.ImagePullPolicy != "" {
			agent.WithImagePullPolicy(spec.ImagePullPolicy)
		}
		out = append(out, agent)
	}
	return out, nil
}

// memcachedResources are the spec's resources with the default memory
// limit when the spec sets none.
func memcachedResources(res corev1.ResourceRequirements, s settings) corev1.ResourceRequirements {
	if s.DefaultMemoryLimit == nil {
		return res
	}
	out := *res.DeepCopy()
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	out.Limits[corev1.ResourceMemory] = *s.DefaultMemoryLimit
	return out
}

func memcachedContainer(spec *cachev1alpha1.MemcachedSpec, s settings) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(containerMemcached).
		WithImage(s.Image).
		WithArgs(memcachedArgs(s)...).
		WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.MemcachedPortName).
			WithContainerPort(cachev1alpha1.MemcachedPort).WithProtocol(corev1.ProtocolTCP)).
		WithLivenessProbe(tcpProbe(cachev1alpha1.MemcachedPortName).
			WithInitialDelaySeconds(10).WithPeriodSeconds(10).WithTimeoutSeconds(2).WithFailureThreshold(3)).
		WithReadinessProbe(tcpProbe(cachev1alpha1.MemcachedPortName).
			WithPeriodSeconds(5).WithTimeoutSeconds(2).WithFailureThreshold(2)).
		WithSecurityContext(memcachedSecurity(spec.ContainerSecurityContext))
	if s.TLS != nil {
		c.WithVolumeMounts(tlsMount())
	}
	if s.Auth != nil {
		c.WithVolumeMounts(authMount())
	}
	applyContainerOverrides(c, &spec.PodOverrides)
	withWarmRestart(c, s)
	return c
}

func exporterContainer(s settings) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(containerExporter).
		WithImage(s.ExporterImage).
		WithArgs(fmt.Sprintf("--memcached.address=127.0.0.1:%d", cachev1alpha1.MemcachedPort),
			fmt.Sprintf("--web.listen-address=:%d", cachev1alpha1.ExporterPort)).
		WithArgs(exporterTLSArgs(s.TLS, true)...).
		WithPorts(corev1ac.ContainerPort().WithName(cachev1alpha1.ExporterPortName).
			WithContainerPort(cachev1alpha1.ExporterPort).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(tcpProbe(cachev1alpha1.ExporterPortName).
			WithPeriodSeconds(10).WithTimeoutSeconds(2)).
		WithSecurityContext(restrictedContainerSecurity())
	if s.TLS != nil && s.TLS.ClientCA != nil {
		// Its client certificate for mutual TLS.
		c.WithVolumeMounts(tlsMount())
	}
	return c
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

// memcachedSecurity is the restricted context with the user's identity and
// profiles; the root filesystem stays read-only.
func memcachedSecurity(x *cachev1alpha1.ContainerSecurity) *corev1ac.SecurityContextApplyConfiguration {
	sc := restrictedContainerSecurity()
	withContainerSecurity(sc, x)
	return sc
}
