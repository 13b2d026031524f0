package memcached

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

// allowedClusterIssuer is the suite manager's
// --memcached-allowed-cluster-issuers.
const allowedClusterIssuer = "shared-ca"

var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

func getCertificate(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(certificateGVK)
	return cert, env.client.Get(ctx, key(ns, name), cert)
}

func eventuallyCertificateObject(t *testing.T, ns, name string, check func(g Gomega, cert *unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	var cert *unstructured.Unstructured
	NewWithT(t).Eventually(func(g Gomega) {
		var err error
		cert, err = getCertificate(context.Background(), ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		check(g, cert)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return cert
}

// issue plays cert-manager's controller: it writes the Certificate's Secret
// (a certificate of ca, the secretTemplate's labels, cert-manager's
// annotation) and marks the Certificate Ready for its generation, with a
// new revision. It returns the certificate's serial.
func issue(t *testing.T, ns, name string, ca *testCA, revision int64) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	cert, err := getCertificate(ctx, ns, name)
	g.Expect(err).NotTo(HaveOccurred())
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
	data, serial := ca.secretData(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(sec), sec); apierrors.IsNotFound(err) {
		sec.Type = corev1.SecretTypeTLS
		sec.Labels, sec.Annotations, sec.Data = labels, map[string]string{"cert-manager.io/certificate-name": name}, data
		g.Expect(env.client.Create(ctx, sec)).To(Succeed())
	} else {
		g.Expect(err).NotTo(HaveOccurred())
		sec.Data = data
		g.Expect(env.client.Update(ctx, sec)).To(Succeed())
	}
	g.Expect(unstructured.SetNestedField(cert.Object, map[string]any{
		"revision": revision,
		"notAfter": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
			"message": "Certificate is up to date and has not expired", "observedGeneration": cert.GetGeneration(),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}, "status")).To(Succeed())
	g.Expect(env.client.Status().Update(ctx, cert)).To(Succeed())
	return serial
}

// With an Issuer of its namespace the controller applies a Certificate
// with the Service's names (accepted by cert-manager's real CRD), waits for
// its Secret, runs memcached with it, reports a renewal of the Secret as
// loaded in place (the pod template unchanged), and deletes the
// Certificate when issuerRef goes.
func TestIssuerRefIssuesTheTLSSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newMemcached(ns, "cache", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cache-tls",
		IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}, ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cache-tls"}}}))

	mc := &cachev1alpha1.Memcached{}
	g.Expect(env.client.Get(ctx, key(ns, "cache"), mc)).To(Succeed())
	cert := eventuallyCertificateObject(t, ns, "cache", func(g Gomega, cert *unstructured.Unstructured) {
		g.Expect(cert.Object["spec"]).To(And(
			HaveKeyWithValue("secretName", "cache-tls"),
			HaveKeyWithValue("issuerRef", map[string]any{"name": "ca", "kind": "Issuer", "group": "cert-manager.io"}),
			HaveKeyWithValue("dnsNames", []any{"cache", "cache." + ns, "cache." + ns + ".svc", "cache." + ns + ".svc.cluster.local"}),
			HaveKeyWithValue("usages", ContainElements("server auth", "client auth")),
			HaveKeyWithValue("secretTemplate", HaveKeyWithValue("labels", HaveKeyWithValue(cachev1alpha1.UsableLabel, "true"))),
		))
	})
	g.Expect(metav1.IsControlledBy(cert, mc)).To(BeTrue())
	g.Expect(cert.GetManagedFields()).To(ContainElement(And(HaveField("Manager", mccontroller.FieldManager),
		HaveField("Operation", metav1.ManagedFieldsOperationApply))))

	// Not issued yet: nothing runs, the status says what it waits for.
	waiting := eventuallyCondition(t, ns, "cache", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonCertificateNotReady)
	g.Expect(waiting.Status.IssuedCertificate).To(HaveValue(And(HaveField("Name", "cache"), HaveField("SecretName", "cache-tls"), HaveField("Ready", false))))
	eventuallyCondition(t, ns, "cache", cachev1alpha1.ConditionCertificateReady, metav1.ConditionFalse, cachev1alpha1.ReasonCertificateNotReady)
	g.Expect(apierrors.IsNotFound(env.client.Get(ctx, key(ns, "cache"), &appsv1.Deployment{}))).To(BeTrue())

	ca := newTestCA(t, "Namespace CA")
	serial1 := issue(t, ns, "cache", ca, 1)
	first := eventuallyDeployment(t, ns, "cache", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Projected.Sources", ContainElement(
			HaveField("Secret.Name", "cache-tls")))))
		g.Expect(d.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Name", "tls-agent")))
	}).Spec.Template.Annotations
	ready := eventuallyCondition(t, ns, "cache", cachev1alpha1.ConditionCertificateReady, metav1.ConditionTrue, cachev1alpha1.ReasonCertificateIssued)
	g.Expect(ready.Status.IssuedCertificate).To(HaveValue(HaveField("Ready", true)))
	eventuallyCondition(t, ns, "cache", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
	eventuallyCertificate(t, ns, "cache", func(g Gomega, c *cachev1alpha1.CertificateStatus) {
		g.Expect(c.SerialNumber).To(Equal(serial1))
	})

	// cert-manager renews: same CA, new key and serial.
	serial2 := issue(t, ns, "cache", ca, 2)
	eventuallyCertificate(t, ns, "cache", func(g Gomega, c *cachev1alpha1.CertificateStatus) {
		g.Expect(c.SerialNumber).To(Equal(serial2))
		g.Expect(c.LastRenewal).To(HaveValue(And(HaveField("Mode", cachev1alpha1.RenewalInPlace), HaveField("PreviousSerialNumber", serial1))))
	})
	d := &appsv1.Deployment{}
	g.Expect(env.client.Get(ctx, key(ns, "cache"), d)).To(Succeed())
	g.Expect(d.Spec.Template.Annotations).To(Equal(first), "a cert-manager renewal must not change the pod template")
	eventuallyRenewalEvent(t, ns, "in place")

	// issuerRef removed: the Secret (labelled usable by the template) stays
	// the TLS Secret, the Certificate goes.
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "cache"), mc)).To(Succeed())
		mc.Spec.TLS.IssuerRef = nil
		g.Expect(env.client.Update(ctx, mc)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func() bool {
		_, err := getCertificate(ctx, ns, "cache")
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, key(ns, "cache"), mc)).To(Succeed())
		g.Expect(mc.Status.IssuedCertificate).To(BeNil())
		g.Expect(mc.Status.Conditions).NotTo(ContainElement(HaveField("Type", cachev1alpha1.ConditionCertificateReady)))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	eventuallyCondition(t, ns, "cache", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
}

// A StatefulSet's certificate covers its instances' names; an allowed
// ClusterIssuer is used as asked.
func TestIssuerRefStatefulSetWithAllowedClusterIssuer(t *testing.T) {
	ns := newNamespace(t)
	create(t, newMemcached(ns, "ring", cachev1alpha1.MemcachedSpec{WorkloadKind: cachev1alpha1.WorkloadStatefulSet,
		TLS: &cachev1alpha1.TLSSpec{SecretName: "ring-tls",
			IssuerRef: &cachev1alpha1.IssuerReference{Name: allowedClusterIssuer, Kind: cachev1alpha1.IssuerKindClusterIssuer}}}))
	svc := "ring." + ns + ".svc"
	eventuallyCertificateObject(t, ns, "ring", func(g Gomega, cert *unstructured.Unstructured) {
		g.Expect(cert.Object["spec"]).To(And(
			HaveKeyWithValue("issuerRef", map[string]any{"name": allowedClusterIssuer, "kind": "ClusterIssuer", "group": "cert-manager.io"}),
			HaveKeyWithValue("dnsNames", []any{"ring", "ring." + ns, svc, svc + ".cluster.local", "*." + svc, "*." + svc + ".cluster.local"}),
		))
	})
	issue(t, ns, "ring", newTestCA(t, "Cluster CA"), 1)
	eventuallyCondition(t, ns, "ring", cachev1alpha1.ConditionCertificateReady, metav1.ConditionTrue, cachev1alpha1.ReasonCertificateIssued)
	NewWithT(t).Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(env.client.Get(context.Background(), key(ns, "ring"), sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Projected.Sources", ContainElement(
			HaveField("Secret.Name", "ring-tls")))))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// Hostile specs: a tenant asks for a certificate it must not get. Each is
// refused with its reason, and no Certificate object is created (cert-manager
// would issue it), nor is a Secret touched.
func TestIssuerRefRefusesHostileSpecs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// A Secret the tenant may not read, and a Service that is not the
	// Memcached's.
	private := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"},
		Data: map[string][]byte{"password": []byte("s3cret")}}
	create(t, private)
	create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}})

	cases := []struct {
		name   string
		tls    cachev1alpha1.TLSSpec
		reason string
	}{
		{"letsencrypt", cachev1alpha1.TLSSpec{SecretName: "le-tls",
			IssuerRef: &cachev1alpha1.IssuerReference{Name: "letsencrypt-prod", Kind: cachev1alpha1.IssuerKindClusterIssuer}},
			cachev1alpha1.ReasonIssuerNotAllowed},
		{"othergroup", cachev1alpha1.TLSSpec{SecretName: "og-tls",
			IssuerRef: &cachev1alpha1.IssuerReference{Name: allowedClusterIssuer, Kind: cachev1alpha1.IssuerKindClusterIssuer, Group: "evil.example.com"}},
			cachev1alpha1.ReasonIssuerNotAllowed},
		{"externalissuer", cachev1alpha1.TLSSpec{SecretName: "ei-tls",
			IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca", Group: "awspca.cert-manager.io"}},
			cachev1alpha1.ReasonIssuerNotAllowed},
		{"apiserver", cachev1alpha1.TLSSpec{SecretName: "as-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"},
			DNSNames: []string{"apiserver", "kubernetes.default.svc"}}, cachev1alpha1.ReasonDNSNameNotAllowed},
		{"neighbour", cachev1alpha1.TLSSpec{SecretName: "nb-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"},
			DNSNames: []string{"api." + ns + ".svc"}}, cachev1alpha1.ReasonDNSNameNotAllowed},
		{"outside", cachev1alpha1.TLSSpec{SecretName: "out-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"},
			DNSNames: []string{"*.example.com"}}, cachev1alpha1.ReasonDNSNameNotAllowed},
		{"overwrite", cachev1alpha1.TLSSpec{SecretName: "db-password", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}},
			cachev1alpha1.ReasonCertificateSecretConflict},
		// A Memcached named after a Service it does not own would get a
		// certificate for that Service's names.
		{"api", cachev1alpha1.TLSSpec{SecretName: "api-tls", IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}},
			cachev1alpha1.ReasonForeignObject},
	}
	for _, tc := range cases {
		create(t, newMemcached(ns, tc.name, cachev1alpha1.MemcachedSpec{TLS: &tc.tls}))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mc := eventuallyCondition(t, ns, tc.name, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, tc.reason)
			if tc.reason != cachev1alpha1.ReasonForeignObject {
				eventuallyCondition(t, ns, tc.name, cachev1alpha1.ConditionCertificateReady, metav1.ConditionFalse, tc.reason)
			}
			g := NewWithT(t)
			g.Expect(mc.Status.IssuedCertificate).To(BeNil())
			_, err := getCertificate(ctx, ns, tc.name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), fmt.Sprintf("a Certificate exists: %v", err))
		})
	}
	// The reconciles that refused are done (their conditions are written);
	// none created any Certificate in the namespace or touched the Secret.
	certs := &unstructured.UnstructuredList{}
	certs.SetGroupVersionKind(certificateGVK.GroupVersion().WithKind("CertificateList"))
	g := NewWithT(t)
	g.Expect(env.client.List(ctx, certs, client.InNamespace(ns))).To(Succeed())
	g.Expect(certs.Items).To(BeEmpty())
	g.Expect(writesTo(env.writes.since(0), "/namespaces/"+ns+"/certificates")).To(BeEmpty())
	g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(private), private)).To(Succeed())
	g.Expect(private.Labels).NotTo(HaveKey(cachev1alpha1.UsableLabel))

	// dnsNames without issuerRef: the CRD refuses it.
	err := env.client.Create(ctx, newMemcached(ns, "names", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "x",
		DNSNames: []string{"names"}}}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), fmt.Sprint(err))
	// An issuerRef kind other than Issuer/ClusterIssuer: the CRD refuses it.
	err = env.client.Create(ctx, newMemcached(ns, "kind", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "x",
		IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca", Kind: "Secret"}}}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), fmt.Sprint(err))
}

// Someone takes the Memcached's Service name while its Certificate waits
// for issuance: the controller deletes the Certificate (it would certify
// another server's names) and says why.
func TestIssuedCertificateDeletedWhenTheServiceNameIsTaken(t *testing.T) {
	ns := newNamespace(t)
	create(t, newMemcached(ns, "taken", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "taken-tls",
		IssuerRef: &cachev1alpha1.IssuerReference{Name: "ca"}}}))
	eventuallyCertificateObject(t, ns, "taken", func(Gomega, *unstructured.Unstructured) {})
	eventuallyCondition(t, ns, "taken", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonCertificateNotReady)

	create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}})
	mc := eventuallyCondition(t, ns, "taken", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonForeignObject)
	g := NewWithT(t)
	g.Expect(mc.Status.IssuedCertificate).To(BeNil())
	g.Eventually(func() bool {
		_, err := getCertificate(context.Background(), ns, "taken")
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}
