package memcached

import (
	"path"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Where memcached finds its auth file: the key authfile of the auth Secret,
// mounted read-only.
const (
	authVolumeName = "memcached-auth"
	authDir        = "/etc/memcached/auth"
)

// authSettings is spec.auth.
type authSettings struct {
	SecretName string
}

func resolveAuth(a *cachev1alpha1.AuthSpec) *authSettings {
	if a == nil {
		return nil
	}
	return &authSettings{SecretName: a.SecretName}
}

// authArgs turn on memcached's ASCII protocol authentication (-Y, memcached
// >= 1.5.15): a connection must first send "set <any> 0 0 <n>" with
// "user password" as the data. It also restricts memcached to the ASCII
// protocol.
func authArgs(a *authSettings) []string {
	if a == nil {
		return nil
	}
	return []string{"-Y", path.Join(authDir, cachev1alpha1.AuthFileKey)}
}

func authVolume(a *authSettings) *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(authVolumeName).WithSecret(corev1ac.SecretVolumeSource().
		WithSecretName(a.SecretName).WithDefaultMode(secretFileMode).
		WithItems(corev1ac.KeyToPath().WithKey(cachev1alpha1.AuthFileKey).WithPath(cachev1alpha1.AuthFileKey)))
}

func authMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(authVolumeName).WithMountPath(authDir).WithReadOnly(true)
}
