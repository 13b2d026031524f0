package memcached

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// DefaultClusterDomain is the DNS domain of the cluster's Services, the
// last of the default DNS names.
const DefaultClusterDomain = "cluster.local"

// certManagerRecheck is how often a Memcached with an issuerRef looks for
// the Certificate kind again while the cluster does not serve it.
const certManagerRecheck = time.Minute

// annotationCertificateName is what cert-manager writes on the Secrets it
// issues: the name of their Certificate.
const annotationCertificateName = "cert-manager.io/certificate-name"

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;patch;delete

// IssuancePolicy is what the administrator lets tenants issue.
type IssuancePolicy struct {
	// AllowedClusterIssuers are the ClusterIssuers a Memcached may name:
	// "name" for cert-manager.io, "group/name" for an external issuer's
	// group. Empty: none.
	AllowedClusterIssuers []string
	// ClusterDomain is the cluster's DNS domain; DefaultClusterDomain
	// when empty.
	ClusterDomain string
}

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

// issuerOf is ref with the CRD's defaults (for objects that never went
// through the apiserver).
func issuerOf(ref *cachev1alpha1.IssuerReference) cachev1alpha1.IssuerReference {
	return cachev1alpha1.IssuerReference{
		Name:  ref.Name,
		Kind:  cmp.Or(ref.Kind, cachev1alpha1.IssuerKindIssuer),
		Group: cmp.Or(ref.Group, cachev1alpha1.CertManagerGroup),
	}
}

// issuerRefused says why ref may not sign (empty: it may).
func (r *Reconciler) issuerRefused(ref cachev1alpha1.IssuerReference) string {
	switch ref.Kind {
	case cachev1alpha1.IssuerKindIssuer:
		if ref.Group != cachev1alpha1.CertManagerGroup {
			return fmt.Sprintf("issuerRef names an Issuer of group %s; only cert-manager.io Issuers (of this namespace) may be named, an external issuer only as a ClusterIssuer the administrator allows", ref.Group)
		}
		return ""
	case cachev1alpha1.IssuerKindClusterIssuer:
		want := ref.Name
		if ref.Group != cachev1alpha1.CertManagerGroup {
			want = ref.Group + "/" + ref.Name
		}
		if slices.Contains(r.Issuance.AllowedClusterIssuers, want) {
			return ""
		}
		return fmt.Sprintf("ClusterIssuer %s is not allowed: the administrator allows Memcacheds only the ClusterIssuers of the manager's --memcached-allowed-cluster-issuers (%s)",
			want, allowedList(r.Issuance.AllowedClusterIssuers))
	}
	return fmt.Sprintf("issuerRef.kind %q is neither Issuer nor ClusterIssuer", ref.Kind)
}

func allowedList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// serviceNames are the names of the Memcached's headless Service, the
// shortest first.
func (r *Reconciler) serviceNames(mc *cachev1alpha1.Memcached) []string {
	svc := mc.Name + "." + mc.Namespace + ".svc"
	return []string{mc.Name, mc.Name + "." + mc.Namespace, svc, svc + "." + r.clusterDomain()}
}

func (r *Reconciler) clusterDomain() string {
	return strings.TrimSuffix(cmp.Or(r.Issuance.ClusterDomain, DefaultClusterDomain), ".")
}

// dnsNames are tls.dnsNames, or by default the Service's names and, for a
// StatefulSet (whose clients address each instance by its own name, see
// status.servers), the wildcards of the instances under the Service.
func (r *Reconciler) dnsNames(mc *cachev1alpha1.Memcached, kind cachev1alpha1.WorkloadKind) []string {
	if names := mc.Spec.TLS.DNSNames; len(names) > 0 {
		return slices.Clone(names)
	}
	names := r.serviceNames(mc)
	if kind == cachev1alpha1.WorkloadStatefulSet {
		names = append(names, "*."+names[2], "*."+names[3])
	}
	return names
}

// dnsNamesRefused says which of names is not the Memcached's own (empty:
// all are): a name of its Service, or one DNS label (or the wildcard)
// under the Service's namespaced names, where only its instances resolve.
func (r *Reconciler) dnsNamesRefused(mc *cachev1alpha1.Memcached, names []string) string {
	own := r.serviceNames(mc)
	var bad []string
	for _, n := range names {
		if !slices.Contains(own, n) && !underService(n, own[2:]) {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("tls.dnsNames %s are not names of this Memcached's Service: allowed are %s and one label or * under the last two",
		strings.Join(bad, ", "), strings.Join(own, ", "))
}

func underService(name string, parents []string) bool {
	for _, p := range parents {
		label, ok := strings.CutSuffix(name, "."+p)
		if ok && (label == "*" || len(validation.IsDNS1123Label(label)) == 0) {
			return true
		}
	}
	return false
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

// applyCertificate applies the desired Certificate unless live (nil when
// absent) already holds every field of it; applied says it did.
func (r *Reconciler) applyCertificate(ctx context.Context, mc *cachev1alpha1.Memcached, ref cachev1alpha1.IssuerReference, names []string,
	live *unstructured.Unstructured, obs *observation) (applied bool, err error) {
	desired := desiredCertificate(mc, ref, names)
	holds := live != nil && isSubset(desired.Object, live.Object) && sameStrings(live, names, "spec", "dnsNames")
	return r.applyUnstructured(ctx, mc, desired, live, holds, obs)
}

// sameStrings: the string list at path of live is want (isSubset compares
// lists by length and order already; this keeps the check explicit where
// an extra entry would widen the certificate).
func sameStrings(live *unstructured.Unstructured, want []string, path ...string) bool {
	have, _, _ := unstructured.NestedStringSlice(live.Object, path...)
	return slices.Equal(have, want)
}

// certificateUsages: memcached serves with the certificate, and the
// exporter presents it as a client certificate under mutual TLS.
var certificateUsages = []any{"digital signature", "key encipherment", "server auth", "client auth"}

// desiredCertificate is the Certificate of mc: ref signs names into
// tls.secretName, labelled usable and with the Memcached's labels.
func desiredCertificate(mc *cachev1alpha1.Memcached, ref cachev1alpha1.IssuerReference, names []string) *unstructured.Unstructured {
	dns := make([]any, len(names))
	for i, n := range names {
		dns[i] = n
	}
	return ownedUnstructured(mc, certificateGVK, anyMap(objectLabels(mc)), map[string]any{
		"secretName":     mc.Spec.TLS.SecretName,
		"secretTemplate": map[string]any{"labels": anyMap(map[string]string{cachev1alpha1.UsableLabel: "true"}, objectLabels(mc))},
		"issuerRef":      map[string]any{"name": ref.Name, "kind": string(ref.Kind), "group": ref.Group},
		"dnsNames":       dns,
		"usages":         certificateUsages,
		// Every renewal gets a new key; the TLS agent loads both.
		"privateKey": map[string]any{"rotationPolicy": "Always"},
	})
}

// certificateReady reads the Certificate's Ready condition: true only for
// the generation cert-manager last looked at.
func certificateReady(cert *unstructured.Unstructured) (bool, string) {
	if cert == nil {
		return false, ""
	}
	conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		msg, _ := m["message"].(string)
		gen, hasGen, _ := unstructured.NestedInt64(m, "observedGeneration")
		if hasGen && gen != cert.GetGeneration() {
			return false, "cert-manager has not seen its current spec yet"
		}
		return m["status"] == "True", msg
	}
	return false, ""
}

// deleteCertificate deletes the owned Certificate, when there is one and
// the kind is served (status.issuedCertificate said there was one).
func (r *Reconciler) deleteCertificate(ctx context.Context, mc *cachev1alpha1.Memcached) error {
	served, err := servesKind(r.Client.RESTMapper(), certificateGVK)
	if err != nil || !served {
		return err
	}
	live, err := getUnstructured(ctx, r.Client, certificateGVK, client.ObjectKeyFromObject(mc))
	if err != nil {
		return fmt.Errorf("reading Certificate: %w", err)
	}
	if live == nil || !metav1.IsControlledBy(live, mc) {
		return nil
	}
	uid, rv := live.GetUID(), live.GetResourceVersion()
	if err := r.Client.Delete(ctx, live, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Certificate: %w", err)
	}
	r.Events.Normal(mc, nil, cachev1alpha1.EventDeleted, "Delete",
		"Deleted Certificate %s: spec.tls has no issuerRef, or it is no longer allowed; its Secret %s stays", mc.Name, live.GetName())
	return nil
}

// servesKind asks discovery (through the manager's RESTMapper, which
// remembers a kind once found) whether the cluster serves gvk.
func servesKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up the %s kind: %w", gvk.Kind, err)
	}
	return true, nil
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
