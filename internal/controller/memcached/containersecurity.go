package memcached

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// capNetBindService is the one capability the restricted level lets a
// container add.
const capNetBindService corev1.Capability = "NET_BIND_SERVICE"

// extraContainerSecurity is restrictedContainerSecurity with the user's
// identity and profiles, a root filesystem writable only when asked, and
// NET_BIND_SERVICE only when asked.
func extraContainerSecurity(x *cachev1alpha1.ExtraContainerSecurity) *corev1ac.SecurityContextApplyConfiguration {
	sc := restrictedContainerSecurity()
	if x == nil {
		return sc
	}
	withContainerSecurity(sc, &x.ContainerSecurity)
	if x.ReadOnlyRootFilesystem != nil && !*x.ReadOnlyRootFilesystem {
		sc.WithReadOnlyRootFilesystem(false)
	}
	if slices.Contains(x.AddCapabilities, capNetBindService) {
		sc.Capabilities.WithAdd(capNetBindService)
	}
	return sc
}

// securityContext is what a container's and a pod's securityContext
// share: the identity and the profiles.
type securityContext[T any] interface {
	WithRunAsUser(int64) T
	WithRunAsGroup(int64) T
	WithSeccompProfile(*corev1ac.SeccompProfileApplyConfiguration) T
	WithAppArmorProfile(*corev1ac.AppArmorProfileApplyConfiguration) T
}

// withContainerSecurity sets the user's identity and profiles on sc, a
// container's securityContext or (from a pod's fields) a pod's.
func withContainerSecurity[T securityContext[T]](sc T, x *cachev1alpha1.ContainerSecurity) {
	if x == nil {
		return
	}
	if x.RunAsUser != nil {
		sc.WithRunAsUser(*x.RunAsUser)
	}
	if x.RunAsGroup != nil {
		sc.WithRunAsGroup(*x.RunAsGroup)
	}
	if x.SeccompProfile != nil {
		sc.WithSeccompProfile(seccompProfile(x.SeccompProfile))
	}
	if x.AppArmorProfile != nil {
		sc.WithAppArmorProfile(appArmorProfile(x.AppArmorProfile))
	}
}

// withPodSecurity sets the user's pod securityContext fields on sc, over
// the controller's defaults.
func withPodSecurity(sc *corev1ac.PodSecurityContextApplyConfiguration, x *cachev1alpha1.PodSecurity) {
	if x == nil {
		return
	}
	withContainerSecurity(sc, &cachev1alpha1.ContainerSecurity{RunAsUser: x.RunAsUser, RunAsGroup: x.RunAsGroup,
		SeccompProfile: x.SeccompProfile, AppArmorProfile: x.AppArmorProfile})
	if x.FSGroup != nil {
		sc.WithFSGroup(*x.FSGroup)
	}
	if x.FSGroupChangePolicy != nil {
		sc.WithFSGroupChangePolicy(*x.FSGroupChangePolicy)
	}
	if len(x.SupplementalGroups) > 0 {
		sc.WithSupplementalGroups(x.SupplementalGroups...)
	}
}

func seccompProfile(p *cachev1alpha1.Profile) *corev1ac.SeccompProfileApplyConfiguration {
	out := corev1ac.SeccompProfile().WithType(corev1.SeccompProfileType(p.Type))
	if p.LocalhostProfile != nil {
		out.WithLocalhostProfile(*p.LocalhostProfile)
	}
	return out
}

func appArmorProfile(p *cachev1alpha1.Profile) *corev1ac.AppArmorProfileApplyConfiguration {
	out := corev1ac.AppArmorProfile().WithType(corev1.AppArmorProfileType(p.Type))
	if p.LocalhostProfile != nil {
		out.WithLocalhostProfile(*p.LocalhostProfile)
	}
	return out
}
