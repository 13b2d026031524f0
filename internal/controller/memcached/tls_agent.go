package memcached

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// DefaultTLSAgentImage is the image of the TLS agent (cmd/memcached-tls-agent)
// when the manager's --memcached-tls-agent-image is not set.
const DefaultTLSAgentImage = "ghcr.io/runbook-dev/runbook-memcached-tls-agent:v0.1.0"

// containerTLSAgent runs beside memcached when TLS is on.
const containerTLSAgent = "tls-agent"

// tlsAgentContainer watches the pod's own TLS volume and loads a renewal
// into the pod's own memcached over the loopback. It gets what memcached
// has and nothing more: the TLS files, the auth file when memcached
// requires authentication (to send refresh_certs as one of its users); no
// token (the pod mounts none), no port, no writable filesystem. Its
// arguments depend only on the spec, so it never changes the template on
// its own.
func tlsAgentContainer(s settings) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(containerTLSAgent).
		WithImage(s.TLSAgentImage).
		WithArgs(tlsAgentArgs(s)...).
		WithVolumeMounts(tlsMount()).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")})).
		WithSecurityContext(restrictedContainerSecurity())
	if s.Auth != nil {
		c.WithVolumeMounts(authMount())
	}
	return c
}

func tlsAgentArgs(s settings) []string {
	args := []string{"-tls-dir=" + tlsDir, fmt.Sprintf("-memcached=127.0.0.1:%d", cachev1alpha1.MemcachedPort)}
	if s.TLS.ClientCA != nil {
		args = append(args, "-mutual-tls")
	}
	if s.Auth != nil {
		args = append(args, "-auth-file="+path.Join(authDir, cachev1alpha1.AuthFileKey))
	}
	return args
}

// tlsAgentHashInput is the agent's part of the configuration hash: the
// pods change when its image or arguments do ("" without TLS, so specs
// without TLS keep their hash).
func tlsAgentHashInput(s settings) []string {
	if s.TLS == nil {
		return nil
	}
	return append([]string{s.TLSAgentImage}, tlsAgentArgs(s)...)
}
