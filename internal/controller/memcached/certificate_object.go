package memcached

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

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
