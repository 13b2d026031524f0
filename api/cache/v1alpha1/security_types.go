package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UsableLabel opts a Secret in: a Secret that a Memcached names (tls,
// tls.clientCA, auth, imagePullSecrets) is used only when it carries this
// label with the value "true", set by whoever may edit Secrets in the
// namespace. Without it anyone allowed to create a Memcached could make
// its pods mount, or pull images with, a Secret they cannot read.
const UsableLabel = "cache.runbook.dev/usable"

// Data keys the controller reads.
const (
	// TLSCertKey and TLSPrivateKeyKey are the keys of a kubernetes.io/tls
	// Secret.
	TLSCertKey       = "tls.crt"
	TLSPrivateKeyKey = "tls.key"
	// DefaultClientCAKey is the CA key cert-manager writes next to the
	// certificate, the default of tls.clientCA.key.
	DefaultClientCAKey = "ca.crt"
	// AuthFileKey holds memcached's auth file: one "user:password" per
	// line, at most 8 lines.
	AuthFileKey = "authfile"
)

// TLSVersion is the lowest TLS version memcached accepts.
// +kubebuilder:validation:Enum="TLS1.2";"TLS1.3"
type TLSVersion string

const (
	TLSVersion12 TLSVersion = "TLS1.2"
	TLSVersion13 TLSVersion = "TLS1.3"
)

// TLSSpec configures TLS (memcached -Z). Every client connection must use
// TLS; plaintext connections fail.
// +kubebuilder:validation:XValidation:rule="!has(self.dnsNames) || has(self.issuerRef)",message="tls.dnsNames needs tls.issuerRef (they are the names of the issued certificate)"
type TLSSpec struct {
	// SecretName is a Secret in the Memcached's namespace with the keys
	// tls.crt (the certificate chain, PEM) and tls.key (its private key,
	// PEM): a kubernetes.io/tls Secret, such as cert-manager writes. It
	// must carry the label cache.runbook.dev/usable=true. With issuerRef it
	// is the Secret the owned Certificate writes (and labels). A renewal
	// under the same issuer is loaded in place; a new issuer replaces the
	// instances one at a time.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	// ClientCA turns on mutual TLS: memcached then refuses clients without
	// a certificate signed by a CA of this PEM bundle. The exporter sidecar
	// presents the certificate of secretName, which must therefore be
	// acceptable as a client certificate too.
	// +optional
	ClientCA *SecretKeySelector `json:"clientCA,omitempty"`

	// MinVersion is the lowest TLS version memcached accepts.
	// +kubebuilder:default="TLS1.2"
	// +optional
	MinVersion TLSVersion `json:"minVersion,omitempty"`

	// IssuerRef makes the controller own a cert-manager Certificate,
	// named after the Memcached, that this issuer signs into secretName;
	// the Secret is labelled usable through the Certificate's
	// secretTemplate. secretName must not be an existing Secret the
	// Certificate did not issue. See docs/memcached.md.
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`

	// DNSNames of the issued certificate (with issuerRef only). Default:
	// the names of the Memcached's Service (name, name.namespace,
	// name.namespace.svc, name.namespace.svc.<cluster domain>) and, for a
	// StatefulSet, the wildcards of its instances under the Service. Each
	// entry must be one of those names or a name under the Service.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`
}

// SecretKeySelector names one key of a Secret in the Memcached's namespace.
type SecretKeySelector struct {
	// Name of the Secret; it must carry the label
	// cache.runbook.dev/usable=true.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key in the Secret's data.
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// AuthSpec configures memcached's ASCII protocol authentication (-Y, an
// auth file). Clients must authenticate first; the binary protocol is off.
type AuthSpec struct {
	// SecretName is a Secret in the Memcached's namespace whose key
	// "authfile" is memcached's auth file: one "user:password" per line, at
	// most 8 lines of at most 255 bytes. It must carry the label
	// cache.runbook.dev/usable=true. A change of its data replaces the
	// instances one at a time.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`
}

// NetworkPolicySpec configures the NetworkPolicy of a cache.
// +kubebuilder:validation:XValidation:rule="!self.enabled || (has(self.clients) && size(self.clients) > 0)",message="networkPolicy.enabled needs at least one entry in clients (otherwise no client could connect)"
type NetworkPolicySpec struct {
	// Enabled creates a NetworkPolicy that admits to the memcache port only
	// the clients listed, and to the exporter's metrics port only the
	// metricsScrapers. Disabling it deletes the NetworkPolicy again.
	Enabled bool `json:"enabled"`

	// Clients that may connect to memcached (port 11211).
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Clients []NetworkPolicyPeer `json:"clients,omitempty"`

	// MetricsScrapers that may connect to the exporter (port 9150), when
	// the exporter is enabled. Default: every pod in the namespaces
	// labelled metrics=enabled.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	MetricsScrapers []NetworkPolicyPeer `json:"metricsScrapers,omitempty"`
}

// NetworkPolicyPeer selects pods as a NetworkPolicy peer does: podSelector
// alone selects pods of the Memcached's namespace; with namespaceSelector,
// those pods in the selected namespaces; namespaceSelector alone, every pod
// of the selected namespaces.
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector)",message="a peer needs a podSelector, a namespaceSelector or both"
type NetworkPolicyPeer struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}
