package v1alpha1

// cert-manager issuance (spec.tls.issuerRef): the controller owns a
// cert-manager Certificate named after the Memcached that writes
// spec.tls.secretName, and uses that Secret as the TLS Secret. The
// controller does not import cert-manager: the Certificate is built
// unstructured, and only when the cluster serves the kind.

// CertManagerGroup is cert-manager's API group, the default of
// issuerRef.group.
const CertManagerGroup = "cert-manager.io"

// IssuerKind is the kind of a cert-manager issuer.
// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
type IssuerKind string

const (
	// IssuerKindIssuer is an issuer in the Memcached's own namespace.
	IssuerKindIssuer IssuerKind = "Issuer"
	// IssuerKindClusterIssuer is a cluster-wide issuer; a Memcached may
	// use one only when the manager's --memcached-allowed-cluster-issuers
	// names it.
	IssuerKindClusterIssuer IssuerKind = "ClusterIssuer"
)

// IssuerReference names the cert-manager issuer of the certificate.
type IssuerReference struct {
	// Name of the Issuer (in the Memcached's namespace) or ClusterIssuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Kind: Issuer (the default) or ClusterIssuer.
	// +kubebuilder:default=Issuer
	// +optional
	Kind IssuerKind `json:"kind,omitempty"`

	// Group of the issuer's API: cert-manager.io (the default) for
	// cert-manager's own issuers. An Issuer must be of cert-manager.io; a
	// ClusterIssuer of another group (an external issuer) must be allowed
	// as group/name by the manager's --memcached-allowed-cluster-issuers.
	// +kubebuilder:default="cert-manager.io"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Group string `json:"group,omitempty"`
}

// Condition type and reasons of issuance.
const (
	// ConditionCertificateReady (only with tls.issuerRef) is True when
	// the owned Certificate is Ready (cert-manager issued the current
	// spec into the Secret).
	ConditionCertificateReady = "CertificateReady"

	// ReasonCertificateIssued (CertificateReady True).
	ReasonCertificateIssued = "Issued"
	// ReasonCertificateNotReady: the Certificate exists but cert-manager
	// has not (yet) issued it; its Ready condition's message is quoted.
	// In Degraded while the Secret holds no certificate yet.
	ReasonCertificateNotReady = "CertificateNotReady"
	// ReasonCertManagerNotInstalled (CertificateReady and Degraded): the
	// cluster does not serve cert-manager.io/v1 Certificates.
	ReasonCertManagerNotInstalled = "CertManagerNotInstalled"
	// ReasonIssuerNotAllowed (CertificateReady and Degraded): the
	// issuerRef names a ClusterIssuer the administrator did not allow, or
	// an Issuer of another group than cert-manager.io. No Certificate is
	// created; an owned one is deleted.
	ReasonIssuerNotAllowed = "IssuerNotAllowed"
	// ReasonDNSNameNotAllowed (CertificateReady and Degraded): a dnsNames
	// entry is not a name of the Memcached's own Service. No Certificate
	// is created; an owned one is deleted.
	ReasonDNSNameNotAllowed = "DNSNameNotAllowed"
	// ReasonCertificateSecretConflict (CertificateReady and Degraded):
	// tls.secretName is an existing Secret that the Memcached's
	// Certificate did not issue (cert-manager would overwrite it).
	ReasonCertificateSecretConflict = "CertificateSecretConflict"
)

// IssuedCertificateStatus is the Certificate the controller owns for
// tls.issuerRef.
type IssuedCertificateStatus struct {
	// Name of the cert-manager Certificate (the Memcached's name).
	Name string `json:"name"`
	// SecretName is the Secret the Certificate writes, the TLS Secret.
	SecretName string `json:"secretName"`
	// Ready is the Certificate's Ready condition.
	Ready bool `json:"ready"`
	// DNSNames the Certificate asks for.
	// +listType=atomic
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`
}
