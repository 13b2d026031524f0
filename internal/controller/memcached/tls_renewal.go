package memcached

import (
	"crypto/x509"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/tlsreload"
)

// Certificate renewals. A new certificate and key from the same issuer is a
// renewal the running memcached loads in place: each pod's TLS agent
// (tls_agent.go) sends refresh_certs when the kubelet updates the mounted
// files, so the pod template must not change and the pods and their items
// stay. What memcached cannot load in place still replaces the pods one at
// a time through AnnotationSecretHash: a new issuer (the identity of who
// signed the certificate, tlsreload.IssuerIdentity) and a new client CA
// (memcached's reload adds CAs, it never drops one).

// tlsObservation is what one reconcile saw of the serving certificate.
type tlsObservation struct {
	// on: the spec asks for TLS.
	on bool
	// leaf is the TLS Secret's certificate (nil when it was not read).
	leaf *x509.Certificate
	// rolled: this reconcile changed the pod template's Secret hash, so
	// the instances are being replaced.
	rolled bool
}

// tlsServerUse is the TLS Secret: its certificate and key must load
// together; only the certificate's issuer rolls the pods.
func tlsServerUse(t *tlsSettings) secretUse {
	return secretUse{name: t.SecretName, keys: []string{cachev1alpha1.TLSCertKey, cachev1alpha1.TLSPrivateKeyKey}, mounted: true,
		check: func(d map[string][]byte) error {
			return keyError(cachev1alpha1.TLSCertKey+" and "+cachev1alpha1.TLSPrivateKeyKey, checkKeyPair(d[cachev1alpha1.TLSCertKey], d[cachev1alpha1.TLSPrivateKeyKey]))
		},
		rollsOn: func(d map[string][]byte) []byte {
			// check ran first: the chain parses.
			leaf, err := tlsreload.Leaf(d[cachev1alpha1.TLSCertKey])
			if err != nil {
				return nil
			}
			return tlsreload.IssuerIdentity(leaf)
		},
	}
}

// observeCertificate makes the TLS Secret's use record its certificate in
// obs when the Secret is read.
func observeCertificate(uses []secretUse, t *tlsSettings, obs *observation) {
	if t == nil {
		return
	}
	for i := range uses {
		if uses[i].name == t.SecretName && uses[i].rollsOn != nil {
			uses[i].observe = func(d map[string][]byte) {
				if leaf, err := tlsreload.Leaf(d[cachev1alpha1.TLSCertKey]); err == nil {
					obs.tls.leaf = leaf
				}
			}
			return
		}
	}
}

// noteSecretRollout records whether applying the workload changed its pod
// template's Secret hash (before: the template's annotations before the
// apply).
func noteSecretRollout(obs *observation, before map[string]string, s settings) {
	obs.tls.rolled = obs.tls.on && before[AnnotationSecretHash] != s.SecretHash
}

// nextCertificateStatus is status.tlsCertificate after this reconcile: the
// certificate read now, and a renewal when its serial differs from the
// one recorded before.
func nextCertificateStatus(prev *cachev1alpha1.CertificateStatus, o tlsObservation, now time.Time) *cachev1alpha1.CertificateStatus {
	switch {
	case !o.on:
		return nil
	case o.leaf == nil:
		return prev.DeepCopy()
	}
	next := &cachev1alpha1.CertificateStatus{
		SerialNumber: tlsreload.SerialHex(o.leaf),
		NotAfter:     metav1.NewTime(o.leaf.NotAfter.UTC()),
		Issuer:       o.leaf.Issuer.String(),
	}
	if prev == nil {
		return next
	}
	next.LastRenewal = prev.LastRenewal.DeepCopy()
	if prev.SerialNumber != next.SerialNumber || prev.Issuer != next.Issuer {
		mode := cachev1alpha1.RenewalInPlace
		if o.rolled {
			mode = cachev1alpha1.RenewalRolled
		}
		next.LastRenewal = &cachev1alpha1.CertificateRenewal{Time: metav1.NewTime(now), Mode: mode, PreviousSerialNumber: prev.SerialNumber}
	}
	return next
}

// reportRenewal emits the event and counts the renewal the status write
// just recorded (before: status.tlsCertificate it replaced).
func (r *Reconciler) reportRenewal(mc *cachev1alpha1.Memcached, obs *observation, before *cachev1alpha1.CertificateStatus) {
	after := mc.Status.TLSCertificate
	if before == nil || after == nil || after.LastRenewal == nil || sameRenewal(before.LastRenewal, after.LastRenewal) {
		return
	}
	secret := ""
	if t := mc.Spec.TLS; t != nil {
		secret = t.SecretName
	}
	if after.LastRenewal.Mode == cachev1alpha1.RenewalInPlace {
		r.Metrics.tlsRenewal(renewalInPlace)
		obs.events.Normal(mc, nil, cachev1alpha1.EventCertificateRenewed, "Renew",
			"The certificate of Secret %s was renewed (serial %s -> %s, expires %s): the TLS agent of each instance loads it in place, no instance is replaced",
			secret, before.SerialNumber, after.SerialNumber, after.NotAfter.UTC().Format(time.RFC3339))
		return
	}
	r.Metrics.tlsRenewal(renewalRolled)
	obs.events.Normal(mc, nil, cachev1alpha1.EventCertificateRenewed, "Renew",
		"The certificate of Secret %s changed issuer or client CA (serial %s -> %s, issuer %s): memcached cannot load a change of trust in place, the instances are replaced one at a time",
		secret, before.SerialNumber, after.SerialNumber, after.Issuer)
}

func sameRenewal(a, b *cachev1alpha1.CertificateRenewal) bool {
	return a != nil && b != nil && a.Time.Equal(&b.Time) && a.Mode == b.Mode && a.PreviousSerialNumber == b.PreviousSerialNumber
}
