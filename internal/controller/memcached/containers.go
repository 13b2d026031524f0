package memcached

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

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
