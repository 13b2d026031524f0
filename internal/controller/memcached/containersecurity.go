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

// withContainerSecurity sets the user's identity and profiles on sc.
func withContainerSecurity(sc *corev1ac.SecurityContextApplyConfiguration, x *cachev1alpha1.ContainerSecurity) {
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
	if x.RunAsUser != nil {
		sc.WithRunAsUser(*x.RunAsUser)
	}
	if x.RunAsGroup != nil {
		sc.WithRunAsGroup(*x.RunAsGroup)
	}
	if x.FSGroup != nil {
		sc.WithFSGroup(*x.FSGroup)
	}
	if x.FSGroupChangePolicy != nil {
		sc.WithFSGroupChangePolicy(*x.FSGroupChangePolicy)
	}
	if len(x.SupplementalGroups) > 0 {
		sc.WithSupplementalGroups(x.SupplementalGroups...)
	}
	if x.SeccompProfile != nil {
		sc.WithSeccompProfile(seccompProfile(x.SeccompProfile))
	}
	if x.AppArmorProfile != nil {
		sc.WithAppArmorProfile(appArmorProfile(x.AppArmorProfile))
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
