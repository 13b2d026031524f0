package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RenewalMode is how a new serving certificate reached the instances.
// +kubebuilder:validation:Enum=InPlace;Rolled
type RenewalMode string

const (
	// RenewalInPlace: a renewal under the same issuer and client CA; the
	// TLS agent of each pod loaded it into the running memcached
	// (refresh_certs). No pod was replaced, the cache kept its items.
	RenewalInPlace RenewalMode = "InPlace"
	// RenewalRolled: the issuer or the client CA changed (a change of
	// trust, which memcached cannot load in place); the instances are
	// replaced one at a time.
	RenewalRolled RenewalMode = "Rolled"
)

// Events of certificate renewals.
const (
	// EventCertificateRenewed: the TLS Secret holds a new certificate;
	// the message says the serials and the mode.
	EventCertificateRenewed = "CertificateRenewed"
)

// CertificateStatus is the serving certificate of the TLS Secret, as the
// controller last read it.
type CertificateStatus struct {
	// SerialNumber of the certificate, in hexadecimal (as openssl and
	// clients print it).
	SerialNumber string `json:"serialNumber"`
	// NotAfter is when the certificate expires.
	NotAfter metav1.Time `json:"notAfter"`
	// Issuer is the distinguished name of the certificate's issuer.
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// LastRenewal is the last change of certificate the controller saw.
	// +optional
	LastRenewal *CertificateRenewal `json:"lastRenewal,omitempty"`
}

// CertificateRenewal is one change of the serving certificate.
type CertificateRenewal struct {
	// Time the controller saw the new certificate in the Secret.
	Time metav1.Time `json:"time"`
	// Mode: InPlace (loaded by the running instances) or Rolled (the
	// instances are replaced).
	Mode RenewalMode `json:"mode"`
	// PreviousSerialNumber is the serial of the certificate it replaced.
	// +optional
	PreviousSerialNumber string `json:"previousSerialNumber,omitempty"`
}
