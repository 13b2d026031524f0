package memcached

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
)

// Against the apiserver, with the manager's RBAC: a renewal under the same
// CA (same client CA) leaves the pod template's hashes alone and is
// reported InPlace; a CA change changes the Secret hash (the pods roll)
// and is reported Rolled; each with one CertificateRenewed event.
func TestCertificateRenewalModes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ca := newTestCA(t, "CA one")
	data, serial1 := ca.secretData(t)
	cert := usableSecret(ns, "cert", data)
	create(t, cert)
	create(t, newMemcached(ns, "cache", cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert",
		ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert"}}}))
	first := eventuallyDeployment(t, ns, "cache", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Annotations).To(HaveKey(mccontroller.AnnotationSecretHash))
		g.Expect(d.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Name", "tls-agent")))
	}).Spec.Template.Annotations
	eventuallyCertificate(t, ns, "cache", func(g Gomega, c *cachev1alpha1.CertificateStatus) {
		g.Expect(c.SerialNumber).To(Equal(serial1))
		g.Expect(c.LastRenewal).To(BeNil())
	})

	data, serial2 := ca.secretData(t)
	g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(cert), cert)).To(Succeed())
	cert.Data = data
	g.Expect(env.client.Update(ctx, cert)).To(Succeed())
	eventuallyCertificate(t, ns, "cache", func(g Gomega, c *cachev1alpha1.CertificateStatus) {
		g.Expect(c.SerialNumber).To(Equal(serial2))
		g.Expect(c.LastRenewal).To(HaveValue(And(HaveField("Mode", cachev1alpha1.RenewalInPlace), HaveField("PreviousSerialNumber", serial1))))
	})
	d := &appsv1.Deployment{}
	g.Expect(env.client.Get(ctx, key(ns, "cache"), d)).To(Succeed())
	g.Expect(d.Spec.Template.Annotations).To(Equal(first), "a renewal under the same CA must not change the pod template")
	eventuallyRenewalEvent(t, ns, "in place")

	ca2 := newTestCA(t, "CA two")
	data, serial3 := ca2.secretData(t)
	g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(cert), cert)).To(Succeed())
	cert.Data = data
	g.Expect(env.client.Update(ctx, cert)).To(Succeed())
	eventuallyCertificate(t, ns, "cache", func(g Gomega, c *cachev1alpha1.CertificateStatus) {
		g.Expect(c.SerialNumber).To(Equal(serial3))
		g.Expect(c.LastRenewal).To(HaveValue(And(HaveField("Mode", cachev1alpha1.RenewalRolled), HaveField("PreviousSerialNumber", serial2))))
	})
	eventuallyDeployment(t, ns, "cache", func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Annotations[mccontroller.AnnotationSecretHash]).NotTo(Equal(first[mccontroller.AnnotationSecretHash]))
		g.Expect(d.Spec.Template.Annotations[mccontroller.AnnotationConfigHash]).To(Equal(first[mccontroller.AnnotationConfigHash]))
	})
	eventuallyRenewalEvent(t, ns, "replaced one at a time")
}

func eventuallyCertificate(t *testing.T, ns, name string, check func(g Gomega, c *cachev1alpha1.CertificateStatus)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		mc := &cachev1alpha1.Memcached{}
		g.Expect(env.client.Get(context.Background(), key(ns, name), mc)).To(Succeed())
		g.Expect(mc.Status.TLSCertificate).NotTo(BeNil())
		check(g, mc.Status.TLSCertificate)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

func eventuallyRenewalEvent(t *testing.T, ns, says string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(env.client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", cachev1alpha1.EventCertificateRenewed), HaveField("Note", ContainSubstring(says)))))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}
