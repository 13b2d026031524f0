package memcached

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// capNetBindService is the one capability the restricted level lets a
// container add.
const capNetBindService corev1.Capability = "NET_BIND_SERVICE"

// extraInitContainers renders the user's init containers, then the sidecars
// as native sidecars (restartPolicy Always): those start, in order, after
// the init containers have finished and before memcached, and stop after
// it.
func extraInitContainers(spec *cachev1alpha1.MemcachedSpec) ([]*corev1ac.ContainerApplyConfiguration, error) {
	var out []*corev1ac.ContainerApplyConfiguration
	for i := range spec.InitContainers {
		c, err := extraContainer(&spec.InitContainers[i], spec.ImagePullPolicy)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for i := range spec.Sidecars {
		c, err := extraContainer(&spec.Sidecars[i], spec.ImagePullPolicy)
		if err != nil {
			return nil, err
		}
		out = append(out, c.WithRestartPolicy(corev1.ContainerRestartPolicyAlways))
	}
	return out, nil
}

// extraContainer renders one sidecar or init container with the security
// context the restricted level requires, whatever the spec says.
func extraContainer(x *cachev1alpha1.ExtraContainer, pull corev1.PullPolicy) (*corev1ac.ContainerApplyConfiguration, error) {
	c := corev1ac.Container().WithName(x.Name).WithImage(x.Image)
	if len(x.Command) > 0 {
		c.WithCommand(x.Command...)
	}
	if len(x.Args) > 0 {
		c.WithArgs(x.Args...)
	}
	for _, e := range x.Env {
		env := corev1ac.EnvVar().WithName(e.Name)
		switch {
		case e.SecretKeyRef != nil:
			env.WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
				corev1ac.SecretKeySelector().WithName(e.SecretKeyRef.Name).WithKey(e.SecretKeyRef.Key)))
		case e.Value != "":
			env.WithValue(e.Value)
		}
		c.WithEnv(env)
	}
	for _, p := range x.Ports {
		port := corev1ac.ContainerPort().WithContainerPort(p.ContainerPort).WithProtocol(cmpProtocol(p.Protocol))
		if p.Name != "" {
			port.WithName(p.Name)
		}
		c.WithPorts(port)
	}
	for _, m := range x.VolumeMounts {
		mount := corev1ac.VolumeMount().WithName(m.Name).WithMountPath(m.MountPath)
		if m.ReadOnly {
			mount.WithReadOnly(true)
		}
		c.WithVolumeMounts(mount)
	}
	if err := withPullAndResources(c, cmpPull(x.ImagePullPolicy, pull), x.Resources, "resources of container "+x.Name); err != nil {
		return nil, err
	}
	return c.WithSecurityContext(extraContainerSecurity(x.SecurityContext)), nil
}

func cmpProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func cmpPull(own, spec corev1.PullPolicy) corev1.PullPolicy {
	if own != "" {
		return own
	}
	return spec
}

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

// invalidOverrides is an override outside the restricted level or one
// that reaches the controller's containers, volumes or files.
func invalidOverrides(format string, args ...any) error {
	return &invalidSpecError{"refused override: " + fmt.Sprintf(format, args...)}
}

// checkSecurityOverrides repeats the CRD's rules on the securityContext
// overrides and the extra containers, for objects that never went through
// the CRD: nothing outside the restricted level is ever rendered.
func checkSecurityOverrides(o *cachev1alpha1.PodOverrides) error {
	if p := o.PodSecurityContext; p != nil {
		if err := checkIdentity("podSecurityContext", p.RunAsUser, p.RunAsGroup); err != nil {
			return err
		}
		for _, g := range append(slices.Clone(p.SupplementalGroups), ptrOr(p.FSGroup, 0)) {
			if g < 0 {
				return invalidOverrides("podSecurityContext groups must not be negative")
			}
		}
		if p.HostUsers != nil && *p.HostUsers {
			return invalidOverrides("podSecurityContext.hostUsers may only be false")
		}
		if err := checkProfiles("podSecurityContext", p.SeccompProfile, p.AppArmorProfile); err != nil {
			return err
		}
	}
	if c := o.ContainerSecurityContext; c != nil {
		if err := checkContainerSecurity("containerSecurityContext", c); err != nil {
			return err
		}
	}
	if n := len(envSecretUses(o)); n > maxEnvSecrets {
		return invalidOverrides("the extra containers' env reads %d Secrets; at most %d", n, maxEnvSecrets)
	}
	return checkExtraContainers(o)
}

func ptrOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

func checkIdentity(what string, user, group *int64) error {
	if user != nil && *user < 1 {
		return invalidOverrides("%s.runAsUser must not be root (0) or negative", what)
	}
	if group != nil && *group < 0 {
		return invalidOverrides("%s.runAsGroup must not be negative", what)
	}
	return nil
}

func checkContainerSecurity(what string, c *cachev1alpha1.ContainerSecurity) error {
	if err := checkIdentity(what, c.RunAsUser, c.RunAsGroup); err != nil {
		return err
	}
	return checkProfiles(what, c.SeccompProfile, c.AppArmorProfile)
}

func checkProfiles(what string, seccomp, apparmor *cachev1alpha1.Profile) error {
	for _, np := range []struct {
		name string
		p    *cachev1alpha1.Profile
	}{{"seccompProfile", seccomp}, {"appArmorProfile", apparmor}} {
		name, p := np.name, np.p
		if p == nil {
			continue
		}
		switch {
		case p.Type != cachev1alpha1.ProfileRuntimeDefault && p.Type != cachev1alpha1.ProfileLocalhost:
			return invalidOverrides("%s.%s.type %q is neither RuntimeDefault nor Localhost", what, name, p.Type)
		case (p.Type == cachev1alpha1.ProfileLocalhost) != (p.LocalhostProfile != nil):
			return invalidOverrides("%s.%s.localhostProfile is required for type Localhost and only allowed there", what, name)
		case p.LocalhostProfile != nil && (*p.LocalhostProfile == "" || strings.Contains(*p.LocalhostProfile, "..") || strings.HasPrefix(*p.LocalhostProfile, "/")):
			return invalidOverrides("%s.%s.localhostProfile must be relative and without '..'", what, name)
		}
	}
	return nil
}

// checkExtraContainers: names apart from the controller's containers and
// each other, mounts only of extraVolumes and never over /etc/memcached,
// no port of memcached's or the exporter's, only NET_BIND_SERVICE added.
func checkExtraContainers(o *cachev1alpha1.PodOverrides) error {
	names := map[string]bool{containerMemcached: true, containerExporter: true}
	volumes := map[string]bool{}
	for _, v := range o.ExtraVolumes {
		volumes[v.Name] = true
	}
	for _, list := range []struct {
		what       string
		containers []cachev1alpha1.ExtraContainer
	}{{"initContainers", o.InitContainers}, {"sidecars", o.Sidecars}} {
		for i := range list.containers {
			x := &list.containers[i]
			what := fmt.Sprintf("%s[%d] (%s)", list.what, i, x.Name)
			if names[x.Name] || strings.HasPrefix(x.Name, "memcached-") {
				return invalidOverrides("%s: the name is taken by the controller's or another extra container", what)
			}
			names[x.Name] = true
			if err := checkExtraContainer(what, x, volumes); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkExtraContainer(what string, x *cachev1alpha1.ExtraContainer, volumes map[string]bool) error {
	for _, m := range x.VolumeMounts {
		if !volumes[m.Name] {
			return invalidOverrides("%s mounts %s, which is not an extraVolume", what, m.Name)
		}
		if !strings.HasPrefix(m.MountPath, "/") || strings.Contains(m.MountPath, "..") || strings.Contains(m.MountPath, ":") ||
			m.MountPath == "/etc/memcached" || strings.HasPrefix(m.MountPath, "/etc/memcached/") {
			return invalidOverrides("%s mounts at %q: mount paths must be absolute, without ':' or '..', and not /etc/memcached or below", what, m.MountPath)
		}
	}
	for _, p := range x.Ports {
		if p.ContainerPort == cachev1alpha1.MemcachedPort || p.ContainerPort == cachev1alpha1.ExporterPort || p.ContainerPort < 1 || p.ContainerPort > 65535 {
			return invalidOverrides("%s declares port %d: 11211 and 9150 are memcached's and the exporter's", what, p.ContainerPort)
		}
	}
	for _, e := range x.Env {
		if e.SecretKeyRef != nil && e.Value != "" {
			return invalidOverrides("%s env %s has both value and secretKeyRef", what, e.Name)
		}
	}
	sc := x.SecurityContext
	if sc == nil {
		return nil
	}
	for _, c := range sc.AddCapabilities {
		if c != capNetBindService {
			return invalidOverrides("%s adds capability %s: only NET_BIND_SERVICE may be added", what, c)
		}
	}
	return checkContainerSecurity(what+".securityContext", &sc.ContainerSecurity)
}

// maxEnvSecrets bounds the Secrets the extra containers' env may read:
// each is read from the apiserver on every reconcile.
const maxEnvSecrets = 8

// envSecretUses are the Secrets the extra containers' env reads, one use
// per Secret with every key it must have: each must be usable. Their data
// is not mounted, so not fingerprinted (a pod reads the value when it
// starts).
func envSecretUses(o *cachev1alpha1.PodOverrides) []secretUse {
	var uses []secretUse
	index := map[string]int{}
	for _, list := range [][]cachev1alpha1.ExtraContainer{o.InitContainers, o.Sidecars} {
		for _, x := range list {
			for _, e := range x.Env {
				ref := e.SecretKeyRef
				if ref == nil {
					continue
				}
				i, seen := index[ref.Name]
				if !seen {
					i = len(uses)
					index[ref.Name] = i
					uses = append(uses, secretUse{name: ref.Name})
				}
				if !slices.Contains(uses[i].keys, ref.Key) {
					uses[i].keys = append(uses[i].keys, ref.Key)
				}
			}
		}
	}
	return uses
}
