package memcached

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// cert-manager issuance (spec.tls.issuerRef). The controller owns a
// Certificate named after the Memcached, applied unstructured with its
// field manager (the manager does not link cert-manager's types), whose
// secretTemplate labels the Secret usable: the controller asked for that
// Secret, so it needs no one else's opt-in. Tenants are untrusted, so the
// Certificate is created only when
//   - the issuer is an Issuer of the Memcached's namespace, or a
//     ClusterIssuer the administrator allowed (--memcached-allowed-cluster-issuers);
//   - every DNS name is a name of the Memcached's own Service (a tenant
//     cannot get a certificate for another Service or an outside name);
//   - the Service of that name is the Memcached's own or absent;
//   - secretName is absent or a Secret this Certificate issued (cert-manager
//     would otherwise overwrite, and label usable, a Secret the tenant may
//     not read).
// Until the Secret holds the issued certificate nothing is applied, as for
// any Secret that may not be used yet. Renewals then reach the pods through
// the TLS agent (tls_renewal.go), like any renewal of the TLS Secret.

// certificateGVK is cert-manager's Certificate.
var certificateGVK = schema.GroupVersionKind{Group: cachev1alpha1.CertManagerGroup, Version: "v1", Kind: "Certificate"}

// certManagerRecheck is how often a Memcached with an issuerRef looks for
// the Certificate kind again while the cluster does not serve it.
const certManagerRecheck = time.Minute

// annotationCertificateName is what cert-manager writes on the Secrets it
// issues: the name of their Certificate.
const annotationCertificateName = "cert-manager.io/certificate-name"

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;patch;delete

// issuanceObservation is what one reconcile saw of the issuance.
type issuanceObservation struct {
	// on: the spec has tls.issuerRef.
	on bool
	// status is status.issuedCertificate (nil when none is owned).
	status *cachev1alpha1.IssuedCertificateStatus
	// notReady is the Certificate's Ready message while it is not Ready.
	notReady string
	// problem stops everything from being applied; it is the Degraded and
	// CertificateReady reason.
	problem *issuanceProblem
	// recheck: look again after this long (0: on the next event).
	recheck time.Duration
}

type issuanceProblem struct{ reason, msg string }

// prepareIssuance applies the Certificate of tls.issuerRef (or deletes the
// owned one without it) and records in obs what it saw. It returns false
// when the TLS Secret cannot be used yet: the Secrets are then not read.
func (r *Reconciler) prepareIssuance(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, obs *observation) (bool, error) {
	if mc.Spec.TLS == nil || mc.Spec.TLS.IssuerRef == nil {
		if mc.Status.IssuedCertificate != nil {
			return true, r.deleteCertificate(ctx, mc)
		}
		return true, nil
	}
	io := &obs.issuance
	io.on = true
	ref := issuerOf(mc.Spec.TLS.IssuerRef)
	names := r.dnsNames(mc, s.Kind)
	io.status = &cachev1alpha1.IssuedCertificateStatus{Name: mc.Name, SecretName: mc.Spec.TLS.SecretName, DNSNames: names}
	block := func(reason, msg string, recheck time.Duration) (bool, error) {
		io.problem, io.recheck = &issuanceProblem{reason, msg}, recheck
		return false, nil
	}
	// A refused issuer or name: no Certificate may exist for it, also not
	// one created before the administrator narrowed the policy or someone
	// else took the Service's name.
	refuse := func(reason, msg string, recheck time.Duration) (bool, error) {
		io.status = nil
		if mc.Status.IssuedCertificate != nil {
			if err := r.deleteCertificate(ctx, mc); err != nil {
				return false, err
			}
		}
		return block(reason, msg, recheck)
	}
	if msg := r.issuerRefused(ref); msg != "" {
		return refuse(cachev1alpha1.ReasonIssuerNotAllowed, msg, 0)
	}
	if msg := r.dnsNamesRefused(mc, names); msg != "" {
		return refuse(cachev1alpha1.ReasonDNSNameNotAllowed, msg, 0)
	}
	served, err := servesKind(r.Client.RESTMapper(), certificateGVK)
	if err != nil {
		return false, err
	}
	if !served {
		io.status = nil
		return block(cachev1alpha1.ReasonCertManagerNotInstalled, fmt.Sprintf(
			"tls.issuerRef needs cert-manager, but the cluster does not serve %s %s; install cert-manager (looked up again every %s), or name a Secret made by hand without issuerRef",
			certificateGVK.GroupVersion(), certificateGVK.Kind, certManagerRecheck), certManagerRecheck)
	}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	svc, err := getLive(ctx, r.Client, key, &corev1.Service{})
	if err != nil {
		return false, fmt.Errorf("reading Service %s: %w", key, err)
	}
	if svc != nil && !metav1.IsControlledBy(svc, mc) {
		return refuse(cachev1alpha1.ReasonForeignObject, fmt.Sprintf(
			"%s is not controlled by this Memcached: no certificate is issued for its names", describeForeign("Service", svc, mc)), 0)
	}
	live, err := getUnstructured(ctx, r.Client, certificateGVK, key)
	if err != nil {
		return false, fmt.Errorf("reading Certificate %s: %w", key, err)
	}
	if live != nil && !metav1.IsControlledBy(live, mc) {
		return block(cachev1alpha1.ReasonForeignObject, describeForeign("Certificate", live, mc)+
			" already exists and is not controlled by this Memcached; the controller leaves it alone. Delete or rename it, or rename this Memcached", 0)
	}
	issued, err := r.secretIssuedBy(ctx, mc)
	if err != nil {
		var notUsable *secretNotUsableError
		if errors.As(err, &notUsable) {
			// cert-manager would overwrite that Secret: also an owned
			// Certificate must go (someone replaced its Secret).
			return refuse(cachev1alpha1.ReasonCertificateSecretConflict, notUsable.msg, r.SecretRecheck)
		}
		return false, err
	}
	applied, err := r.applyCertificate(ctx, mc, ref, names, live, obs)
	if err != nil {
		return false, err
	}
	ready, msg := certificateReady(live)
	io.status.Ready = ready && !applied
	if !io.status.Ready {
		io.notReady = cmp.Or(msg, "cert-manager has not issued it yet")
		if applied {
			io.notReady = "cert-manager has not seen its current spec yet"
		}
	}
	if !issued {
		return block(cachev1alpha1.ReasonCertificateNotReady, fmt.Sprintf(
			"waiting for cert-manager to issue Certificate %s into Secret %s (%s); nothing is applied until then",
			mc.Name, mc.Spec.TLS.SecretName, io.notReady), r.SecretRecheck)
	}
	return true, nil
}

// secretIssuedBy reads tls.secretName: issued is true when it holds a
// certificate of the Memcached's Certificate. A Secret that exists but
// was not issued by it is a *secretNotUsableError: cert-manager would
// overwrite it. This tells a tenant that a Secret of that name exists in
// its namespace (unavoidable: issuing into it is what must not happen);
// nothing of its content is read or reported.
func (r *Reconciler) secretIssuedBy(ctx context.Context, mc *cachev1alpha1.Memcached) (issued bool, err error) {
	name := mc.Spec.TLS.SecretName
	sec, err := getLive(ctx, r.APIReader, types.NamespacedName{Namespace: mc.Namespace, Name: name}, &corev1.Secret{})
	switch {
	case err != nil:
		return false, fmt.Errorf("reading Secret %s failed (%s)", name, status.APIErrorReason(err))
	case sec == nil:
		return false, nil
	case sec.Annotations[annotationCertificateName] != mc.Name:
		return false, &secretNotUsableError{fmt.Sprintf(
			"Secret %s already exists and was not issued by Certificate %s: cert-manager would overwrite it, so no Certificate is created; name a Secret that does not exist in tls.secretName, or delete this one",
			name, mc.Name)}
	}
	return len(sec.Data[cachev1alpha1.TLSCertKey]) > 0, nil
}

// setCertificateReady sets (or, without issuerRef, removes) the
// CertificateReady condition.
func setCertificateReady(conds status.Conditions, list *[]metav1.Condition, io issuanceObservation) {
	const typ = cachev1alpha1.ConditionCertificateReady
	switch {
	case !io.on:
		meta.RemoveStatusCondition(list, typ)
	case io.problem != nil && io.problem.reason != cachev1alpha1.ReasonCertificateNotReady:
		conds.False(typ, io.problem.reason, io.problem.msg)
	case io.status != nil && io.status.Ready:
		conds.True(typ, cachev1alpha1.ReasonCertificateIssued, fmt.Sprintf(
			"Certificate %s is ready; its Secret %s is the TLS Secret", io.status.Name, io.status.SecretName))
	case io.status != nil:
		conds.False(typ, cachev1alpha1.ReasonCertificateNotReady, fmt.Sprintf(
			"Certificate %s is not ready: %s", io.status.Name, io.notReady))
	}
}
