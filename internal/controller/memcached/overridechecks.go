package memcached

import (
	"fmt"
	"slices"
	"strings"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// invalidOverrides is an override outside the restricted level or one
// that reaches the controller's containers, volumes or files.
func invalidOverrides(format string, args ...any) error {
	return &invalidSpecError{Msg: "refused override: " + fmt.Sprintf(format, args...)}
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
	names := map[string]bool{containerMemcached: true, containerExporter: true, containerTLSAgent: true}
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
