package memcached

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func issuingMemcached(ns, name string, tls *cachev1alpha1.TLSSpec) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-1", Generation: 1},
		Spec: cachev1alpha1.MemcachedSpec{TLS: tls}}
}

// Hostile issuer references: a tenant names issuers the administrator did
// not allow. Only Issuers of cert-manager.io (in the tenant's namespace)
// and the listed ClusterIssuers pass.
func TestIssuerPolicy(t *testing.T) {
	r := &Reconciler{Issuance: IssuancePolicy{AllowedClusterIssuers: []string{"shared-ca", "awspca.cert-manager.io/pca"}}}
	for _, tc := range []struct {
		ref     cachev1alpha1.IssuerReference
		allowed bool
	}{
		{cachev1alpha1.IssuerReference{Name: "own-ca"}, true},
		{cachev1alpha1.IssuerReference{Name: "own-ca", Kind: cachev1alpha1.IssuerKindIssuer, Group: "cert-manager.io"}, true},
		{cachev1alpha1.IssuerReference{Name: "shared-ca", Kind: cachev1alpha1.IssuerKindClusterIssuer}, true},
		{cachev1alpha1.IssuerReference{Name: "pca", Kind: cachev1alpha1.IssuerKindClusterIssuer, Group: "awspca.cert-manager.io"}, true},
		// Not listed.
		{cachev1alpha1.IssuerReference{Name: "letsencrypt-prod", Kind: cachev1alpha1.IssuerKindClusterIssuer}, false},
		// Listed for cert-manager.io, asked under another group.
		{cachev1alpha1.IssuerReference{Name: "shared-ca", Kind: cachev1alpha1.IssuerKindClusterIssuer, Group: "evil.example.com"}, false},
		// Listed as group/name, asked as a cert-manager.io ClusterIssuer.
		{cachev1alpha1.IssuerReference{Name: "pca", Kind: cachev1alpha1.IssuerKindClusterIssuer}, false},
		// An external "Issuer" could be cluster-scoped in its own API.
		{cachev1alpha1.IssuerReference{Name: "pca", Kind: cachev1alpha1.IssuerKindIssuer, Group: "awspca.cert-manager.io"}, false},
		// A kind the CRD refuses, from an object that never went through it.
		{cachev1alpha1.IssuerReference{Name: "x", Kind: "Secret"}, false},
	} {
		msg := r.issuerRefused(issuerOf(&tc.ref))
		if (msg == "") != tc.allowed {
			t.Errorf("%+v: refused %q, want allowed=%v", tc.ref, msg, tc.allowed)
		}
	}
	none := &Reconciler{}
	if msg := none.issuerRefused(issuerOf(&cachev1alpha1.IssuerReference{Name: "shared-ca", Kind: cachev1alpha1.IssuerKindClusterIssuer})); !strings.Contains(msg, "(none)") {
		t.Errorf("no allowed ClusterIssuers: %q", msg)
	}
}

// The default names are the Service's (and, for a StatefulSet, its
// instances'); every name a tenant adds must stay under its own Service.
func TestDNSNamePolicy(t *testing.T) {
	r := &Reconciler{Issuance: IssuancePolicy{ClusterDomain: "corp.internal."}}
	mc := issuingMemcached("shop", "cache", &cachev1alpha1.TLSSpec{SecretName: "cache-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}})
	want := []string{"cache", "cache.shop", "cache.shop.svc", "cache.shop.svc.corp.internal"}
	if got := r.dnsNames(mc, cachev1alpha1.WorkloadDeployment); !slices.Equal(got, want) {
		t.Errorf("Deployment default names %v, want %v", got, want)
	}
	sts := r.dnsNames(mc, cachev1alpha1.WorkloadStatefulSet)
	if want := append(want, "*.cache.shop.svc", "*.cache.shop.svc.corp.internal"); !slices.Equal(sts, want) {
		t.Errorf("StatefulSet default names %v, want %v", sts, want)
	}
	if msg := r.dnsNamesRefused(mc, sts); msg != "" {
		t.Errorf("the default names are refused: %s", msg)
	}
	for _, ok := range []string{"cache-0.cache.shop.svc", "cache-1.cache.shop.svc.corp.internal", "cache.shop"} {
		if msg := r.dnsNamesRefused(mc, []string{ok}); msg != "" {
			t.Errorf("%q refused: %s", ok, msg)
		}
	}
	for _, hostile := range []string{
		"kubernetes.default.svc",                    // another namespace's Service
		"api.shop.svc",                              // another Service of the namespace
		"api",                                       // its short name
		"www.example.com",                           // outside the cluster
		"*.shop.svc",                                // every Service of the namespace
		"*.svc.corp.internal",                       // every Service
		"a.b.cache.shop.svc",                        // two labels under the Service
		"cache.shop.svc.evil.example",               // the Service's name as a prefix
		"cache.shop.svc.cluster.local",              // another cluster domain than the configured one
		"CACHE.shop.svc",                            // not the exact name
		"x_y.cache.shop.svc",                        // not a DNS label
		"cache.shop.svc.corp.internal.",             // absolute form
		"..cache.shop.svc",                          // empty labels
		"cache-0.cache.shop.svc/evil",               // not a name at all
		strings.Repeat("a", 64) + ".cache.shop.svc", // label too long
	} {
		msg := r.dnsNamesRefused(mc, []string{"cache", hostile})
		if msg == "" || !strings.Contains(msg, hostile) {
			t.Errorf("%q is not refused (%q)", hostile, msg)
		}
	}
}

// The Certificate asks for what the spec says, labels its Secret usable,
// and is controlled by the Memcached.
func TestDesiredCertificate(t *testing.T) {
	mc := issuingMemcached("shop", "cache", &cachev1alpha1.TLSSpec{SecretName: "cache-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}})
	cert := desiredCertificate(mc, issuerOf(mc.Spec.TLS.IssuerRef), []string{"cache", "cache.shop"})
	spec := cert.Object["spec"].(map[string]any)
	if spec["secretName"] != "cache-tls" {
		t.Errorf("secretName %v", spec["secretName"])
	}
	if ref := spec["issuerRef"].(map[string]any); ref["name"] != "ca" || ref["kind"] != "Issuer" || ref["group"] != "cert-manager.io" {
		t.Errorf("issuerRef %v", ref)
	}
	labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
	if labels[cachev1alpha1.UsableLabel] != "true" {
		t.Errorf("secretTemplate labels %v", labels)
	}
	if ref := metav1.GetControllerOf(cert); ref == nil || ref.UID != mc.UID || ref.Kind != "Memcached" {
		t.Errorf("controller %+v", ref)
	}
}

// Ready only counts for the generation cert-manager looked at.
func TestCertificateReady(t *testing.T) {
	cert := &unstructured.Unstructured{Object: map[string]any{}}
	cert.SetGeneration(2)
	setReady := func(status string, gen int64) {
		_ = unstructured.SetNestedSlice(cert.Object, []any{map[string]any{
			"type": "Ready", "status": status, "message": "m", "observedGeneration": gen}}, "status", "conditions")
	}
	if ready, _ := certificateReady(cert); ready {
		t.Error("ready without conditions")
	}
	setReady("True", 1)
	if ready, _ := certificateReady(cert); ready {
		t.Error("ready for an older generation")
	}
	setReady("True", 2)
	if ready, msg := certificateReady(cert); !ready || msg != "m" {
		t.Errorf("ready %v %q", ready, msg)
	}
	setReady("False", 2)
	if ready, _ := certificateReady(cert); ready {
		t.Error("ready while False")
	}
}

// Without cert-manager: the first reconcile says so, applies nothing, does
// not fail (no error backoff loop) and looks again after
// certManagerRecheck.
func TestIssuerRefWithoutCertManager(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "cache"}
	lc := newLaggingCache(t, issuingMemcached(key.Namespace, key.Name,
		&cachev1alpha1.TLSSpec{SecretName: "cache-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}}))
	r, recorder := secretsReconciler(t, lc)
	for range 2 {
		if res := reconcileOnce(t, r, key); res.RequeueAfter != certManagerRecheck {
			t.Fatalf("requeue after %v, want %v", res.RequeueAfter, certManagerRecheck)
		}
	}
	st := lc.memcached(t, key).Status
	for _, typ := range []string{cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionCertificateReady} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.Reason != cachev1alpha1.ReasonCertManagerNotInstalled {
			t.Errorf("%s: %+v", typ, c)
		}
	}
	if st.IssuedCertificate != nil {
		t.Errorf("issuedCertificate %+v without a Certificate", st.IssuedCertificate)
	}
	err := lc.server.Get(t.Context(), key, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Deployment: %v, want none", err)
	}
	if evs := drain(recorder); len(evs) != 1 || !strings.Contains(evs[0], cachev1alpha1.ReasonCertManagerNotInstalled) {
		t.Errorf("events %q, want one %s warning", evs, cachev1alpha1.ReasonCertManagerNotInstalled)
	}
}

// The Certificate watch passes what prepareIssuance and a renewal change,
// not cert-manager's other status writes.
func TestCertificateChanged(t *testing.T) {
	base := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"revision": int64(1), "notAfter": "2027-01-01T00:00:00Z",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "message": "up to date"}},
	}}}
	for _, tc := range []struct {
		name   string
		edit   func(u *unstructured.Unstructured)
		passes bool
	}{
		{"renewal", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "revision")
		}, true},
		{"expiry", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2027-03-01T00:00:00Z", "status", "notAfter")
		}, true},
		{"not ready", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "False", "message": "issuing"}}, "status", "conditions")
		}, true},
		{"renewal time only", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2026-12-01T00:00:00Z", "status", "renewalTime")
		}, false},
		{"another condition", func(u *unstructured.Unstructured) {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			_ = unstructured.SetNestedSlice(u.Object, append(conds, map[string]any{"type": "Issuing", "status": "True"}), "status", "conditions")
		}, false},
	} {
		n := base.DeepCopy()
		tc.edit(n)
		if got := certificateChanged(base, n); got != tc.passes {
			t.Errorf("%s: passes %v, want %v", tc.name, got, tc.passes)
		}
	}
}
