package memcached

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// AnnotationConfigHash on the pod template identifies the memcached
// configuration the pods run; a new value rolls the pods.
const AnnotationConfigHash = "cache.runbook.dev/config-hash"

// reservedAnnotationPrefix: the controller's pod annotations.
const reservedAnnotationPrefix = "cache.runbook.dev/"

// podLabels are the pod template's labels: the user's podLabels, then the
// controller's own labels, which always win (the CRD refuses to set them).
func podLabels(mc *cachev1alpha1.Memcached) map[string]string {
	out := maps.Clone(mc.Spec.PodLabels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, objectLabels(mc))
	return out
}

// podAnnotations: the user's podAnnotations, the config hash and, with TLS
// or auth, the Secrets' fingerprint.
func podAnnotations(mc *cachev1alpha1.Memcached, s settings) map[string]string {
	out := maps.Clone(mc.Spec.PodAnnotations)
	if out == nil {
		out = map[string]string{}
	}
	out[AnnotationConfigHash] = configHash(s, &mc.Spec.PodOverrides)
	if s.SecretHash != "" {
		out[AnnotationSecretHash] = s.SecretHash
	}
	return out
}

// applyPodOverrides sets the pod-level overrides the spec sets.
func applyPodOverrides(pod *corev1ac.PodSpecApplyConfiguration, o *cachev1alpha1.PodOverrides) {
	for _, p := range o.ImagePullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(p.Name))
	}
	if o.ServiceAccountName != "" {
		pod.WithServiceAccountName(o.ServiceAccountName)
	}
	if o.TerminationGracePeriodSeconds != nil {
		pod.WithTerminationGracePeriodSeconds(*o.TerminationGracePeriodSeconds)
	}
}

// applyContainerOverrides sets the memcached container's overrides: plain
// environment variables, the extra volumes' mounts and the preStop delay.
func applyContainerOverrides(c *corev1ac.ContainerApplyConfiguration, o *cachev1alpha1.PodOverrides) {
	for _, e := range o.ExtraEnv {
		env := corev1ac.EnvVar().WithName(e.Name)
		if e.Value != "" {
			env.WithValue(e.Value)
		}
		c.WithEnv(env)
	}
	for _, v := range o.ExtraVolumes {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(v.Name).WithMountPath(v.MountPath))
	}
	if o.PreStopDelaySeconds > 0 {
		// The sleep action needs no shell in the image.
		c.WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithSleep(corev1ac.SleepAction().WithSeconds(int64(o.PreStopDelaySeconds)))))
	}
}

// extraVolumes renders the scratch volumes: emptyDir, or an ephemeral
// claim that always starts empty (no dataSource).
func extraVolumes(vols []cachev1alpha1.ExtraVolume) ([]*corev1ac.VolumeApplyConfiguration, error) {
	out := make([]*corev1ac.VolumeApplyConfiguration, 0, len(vols))
	for _, v := range vols {
		vol := corev1ac.Volume().WithName(v.Name)
		switch {
		case v.EmptyDir != nil:
			src := corev1ac.EmptyDirVolumeSource()
			if v.EmptyDir.Medium != "" {
				src.WithMedium(v.EmptyDir.Medium)
			}
			if v.EmptyDir.SizeLimit != nil {
				src.WithSizeLimit(*v.EmptyDir.SizeLimit)
			}
			vol.WithEmptyDir(src)
		case v.Ephemeral != nil:
			vol.WithEphemeral(ephemeralVolume(v.Ephemeral))
		default:
			return nil, &invalidSpecError{Msg: fmt.Sprintf("extra volume %s needs emptyDir or ephemeral", v.Name)}
		}
		out = append(out, vol)
	}
	return out, nil
}

func ephemeralVolume(e *cachev1alpha1.EphemeralVolume) *corev1ac.EphemeralVolumeSourceApplyConfiguration {
	claim := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: e.Size}))
	if e.StorageClassName != nil {
		claim.WithStorageClassName(*e.StorageClassName)
	}
	return corev1ac.EphemeralVolumeSource().WithVolumeClaimTemplate(corev1ac.PersistentVolumeClaimTemplate().WithSpec(claim))
}

// checkPodOverrides makes the checks the CRD cannot (label and annotation
// syntax) and repeats the ones that protect the controller's own labels,
// annotations and files, for objects that never went through the CRD.
func checkPodOverrides(o *cachev1alpha1.PodOverrides) error {
	for _, k := range slices.Sorted(maps.Keys(o.PodLabels)) {
		if err := checkPodLabel(k, o.PodLabels[k]); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.PodAnnotations)) {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			return &invalidSpecError{Msg: fmt.Sprintf("podAnnotations key %q is not a valid annotation key: %s", k, strings.Join(errs, "; "))}
		}
		if strings.HasPrefix(k, reservedAnnotationPrefix) {
			return &invalidSpecError{Msg: fmt.Sprintf("podAnnotations must not set %q: the controller sets %s annotations", k, reservedAnnotationPrefix)}
		}
	}
	for _, e := range o.ExtraEnv {
		if reservedEnv(e.Name) {
			return &invalidSpecError{Msg: fmt.Sprintf("extraEnv must not set %s: memcached, OpenSSL, SASL, getopt or the dynamic loader read it", e.Name)}
		}
	}
	for _, v := range o.ExtraVolumes {
		if v.MountPath == "/etc/memcached" || strings.HasPrefix(v.MountPath, "/etc/memcached/") || strings.HasPrefix(v.Name, "memcached-") {
			return &invalidSpecError{Msg: fmt.Sprintf("extra volume %s must not use the controller's name prefix memcached- or mount at /etc/memcached", v.Name)}
		}
	}
	return nil
}

func checkPodLabel(k, v string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return &invalidSpecError{Msg: fmt.Sprintf("podLabels key %q is not a valid label key: %s", k, strings.Join(errs, "; "))}
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return &invalidSpecError{Msg: fmt.Sprintf("podLabels value of %q is not a valid label value: %s", k, strings.Join(errs, "; "))}
	}
	if _, ours := objectLabelKeys[k]; ours {
		return &invalidSpecError{Msg: fmt.Sprintf("podLabels must not set %q: the controller selects its pods by it", k)}
	}
	return nil
}

// reservedEnvPrefixes are the environment variables that change what
// memcached runs with besides its command line: its own (MEMCACHED_PORT_FILENAME,
// T_MEMD_INITIAL_MALLOC, MEMCACHED_SASL_PWDB), SASL's, OpenSSL's
// (OPENSSL_CONF loads engines and providers), the dynamic loader's, and
// POSIXLY_CORRECT, which changes how getopt reads the arguments.
var reservedEnvPrefixes = []string{"MEMCACHED_", "T_MEMD_", "SASL_", "OPENSSL_", "SSL_", "LD_"}

func reservedEnv(name string) bool {
	upper := strings.ToUpper(name)
	if upper == "POSIXLY_CORRECT" {
		return true
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(upper, p) {
			return true
		}
	}
	return false
}
