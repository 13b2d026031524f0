package memcached

import (
	"cmp"
	"fmt"
	"path"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Where the pods find the TLS files: a projected volume of the TLS Secret
// (tls.crt, tls.key) and the client CA (client-ca.crt), read-only.
const (
	tlsVolumeName = "memcached-tls"
	tlsDir        = "/etc/memcached/tls"
	clientCAFile  = "client-ca.crt"
	// sslVerifyRequire is memcached's ssl_verify_mode 2: a client without
	// a certificate the CA signed is refused (SSL_VERIFY_PEER |
	// SSL_VERIFY_FAIL_IF_NO_PEER_CERT).
	sslVerifyRequire = "2"
)

// tlsSettings is spec.tls, defaulted.
type tlsSettings struct {
	SecretName string
	// ClientCA turns on mutual TLS; Key is defaulted.
	ClientCA   *cachev1alpha1.SecretKeySelector
	MinVersion cachev1alpha1.TLSVersion
}

func resolveTLS(t *cachev1alpha1.TLSSpec) *tlsSettings {
	if t == nil {
		return nil
	}
	out := &tlsSettings{SecretName: t.SecretName, MinVersion: cmp.Or(t.MinVersion, cachev1alpha1.TLSVersion12)}
	if ca := t.ClientCA; ca != nil {
		out.ClientCA = &cachev1alpha1.SecretKeySelector{Name: ca.Name, Key: cmp.Or(ca.Key, cachev1alpha1.DefaultClientCAKey)}
	}
	return out
}

// sslMinVersion is memcached's ssl_min_version code of v.
func sslMinVersion(v cachev1alpha1.TLSVersion) (string, error) {
	switch v {
	case cachev1alpha1.TLSVersion12:
		return "2", nil
	case cachev1alpha1.TLSVersion13:
		return "3", nil
	}
	return "", &invalidSpecError{Msg: fmt.Sprintf("tls.minVersion %q is neither TLS1.2 nor TLS1.3", v)}
}

// tlsArgs turn TLS on for every connection (-Z) with the mounted files.
func tlsArgs(t *tlsSettings) []string {
	if t == nil {
		return nil
	}
	minVersion, _ := sslMinVersion(t.MinVersion) // checked by checkSecurity
	subs := []string{
		"ssl_chain_cert=" + path.Join(tlsDir, cachev1alpha1.TLSCertKey),
		"ssl_key=" + path.Join(tlsDir, cachev1alpha1.TLSPrivateKeyKey),
		"ssl_min_version=" + minVersion,
	}
	if t.ClientCA != nil {
		subs = append(subs, "ssl_ca_cert="+path.Join(tlsDir, clientCAFile), "ssl_verify_mode="+sslVerifyRequire)
	}
	return []string{"-Z", "-o", strings.Join(subs, ",")}
}

// exporterTLSArgs make the exporter sidecar scrape over TLS. It talks to
// 127.0.0.1 in the pod's own network namespace, so the peer is this pod's
// memcached by construction and the certificate's names (which need not
// include 127.0.0.1) are not checked. With mutual TLS it presents the
// server's own certificate.
func exporterTLSArgs(t *tlsSettings, exporter bool) []string {
	if t == nil || !exporter {
		return nil
	}
	args := []string{"--memcached.tls.enable", "--memcached.tls.insecure-skip-verify"}
	if t.ClientCA != nil {
		args = append(args,
			"--memcached.tls.cert-file="+path.Join(tlsDir, cachev1alpha1.TLSCertKey),
			"--memcached.tls.key-file="+path.Join(tlsDir, cachev1alpha1.TLSPrivateKeyKey))
	}
	return args
}

// tlsVolume projects the certificate, its key and the client CA into one
// read-only directory.
func tlsVolume(t *tlsSettings) *corev1ac.VolumeApplyConfiguration {
	server := corev1ac.SecretProjection().WithName(t.SecretName).WithItems(
		corev1ac.KeyToPath().WithKey(cachev1alpha1.TLSCertKey).WithPath(cachev1alpha1.TLSCertKey),
		corev1ac.KeyToPath().WithKey(cachev1alpha1.TLSPrivateKeyKey).WithPath(cachev1alpha1.TLSPrivateKeyKey))
	sources := []*corev1ac.VolumeProjectionApplyConfiguration{corev1ac.VolumeProjection().WithSecret(server)}
	if ca := t.ClientCA; ca != nil {
		item := corev1ac.KeyToPath().WithKey(ca.Key).WithPath(clientCAFile)
		if ca.Name == t.SecretName {
			server.WithItems(item)
		} else {
			sources = append(sources, corev1ac.VolumeProjection().WithSecret(
				corev1ac.SecretProjection().WithName(ca.Name).WithItems(item)))
		}
	}
	return corev1ac.Volume().WithName(tlsVolumeName).WithProjected(
		corev1ac.ProjectedVolumeSource().WithDefaultMode(secretFileMode).WithSources(sources...))
}

func tlsMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(tlsVolumeName).WithMountPath(tlsDir).WithReadOnly(true)
}
