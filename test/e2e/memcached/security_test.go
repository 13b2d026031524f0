package memcached

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// applySample applies a config/samples file with the real kubectl. A
// cert-manager Certificate in it (the cluster has no cert-manager) is
// replaced by the Secret cert-manager would write: a new certificate, with
// the Certificate's secretTemplate labels.
func applySample(t *testing.T, ns, file string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	g.Expect(err).NotTo(HaveOccurred())
	var rest [][]byte
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed())
		switch u.GetObjectKind().GroupVersionKind().Group {
		case "cert-manager.io":
			if u.GetKind() == "Certificate" {
				name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
				labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "secretTemplate", "labels")
				g.Expect(cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
					Type: corev1.SecretTypeTLS, Data: newCertificate(t, "sample CA")})).To(Succeed())
			}
		default:
			rest = append(rest, doc)
		}
	}
	path := filepath.Join(t.TempDir(), file)
	g.Expect(os.WriteFile(path, bytes.Join(rest, []byte("\n---\n")), 0o600)).To(Succeed())
	out, err := kc.Kubectl(ctx, "-n", ns, "apply", "-f", path)
	g.Expect(err).NotTo(HaveOccurred(), out)
}

// The TLS and auth sample reaches Available with its pods Running (their
// pods mount the Secrets under the restricted profile), kubectl shows TLS,
// auth and the kind, and a renewal of the certificate replaces every pod
// without anyone touching the Memcached.
func TestTLSAuthSample(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defer func() { mgr.DumpLogsOnFailure(t.Failed()) }()
	ns := createNamespace(t, "mc-tls")
	const name = "sessions"
	applySample(t, ns, "cache_v1alpha1_memcached_tls_auth.yaml")
	mc := expectSettled(t, ns, name, 2)
	g.Expect(mc.Status.TLS).To(HaveValue(BeTrue()))
	g.Expect(mc.Status.Auth).To(HaveValue(BeTrue()))
	out, err := kc.Kubectl(ctx, "-n", ns, "get", "mc", name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`(?m)^NAME\s+SIZE\s+READY\s+AVAILABLE\s+TLS\s+AUTH\s+KIND\s+AGE$`), "printer columns:\n%s", out)
	g.Expect(out).To(MatchRegexp(`(?m)^sessions\s+2\s+2\s+True\s+true\s+true\s+Deployment\s+`), "printer columns:\n%s", out)

	pods := runningPods(g, ns, name)
	for _, p := range pods {
		g.Expect(p.Spec.Volumes).To(ContainElements(HaveField("Name", "memcached-tls"), HaveField("Name", "memcached-auth")))
	}
	old := map[types.UID]bool{}
	for _, p := range pods {
		old[p.UID] = true
	}

	// A certificate of a new CA (a change of trust, which rolls; a renewal by
	// the same CA is loaded in place, tls_renewal.go): new data in the same Secret.
	sec := &corev1.Secret{}
	g.Expect(cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sessions-tls"}, sec)).To(Succeed())
	sec.Data = newCertificate(t, "renewed CA")
	g.Expect(cl.Update(ctx, sec)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := runningPods(g, ns, name)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(old).NotTo(HaveKey(p.UID), "pod %s is from before the renewal", p.Name)
		}
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	expectSettled(t, ns, name, 2)
}

// The StatefulSet sample: pods name-0..2 and status.servers their stable
// names, in ordinal order.
func TestStatefulSetSample(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defer func() { mgr.DumpLogsOnFailure(t.Failed()) }()
	ns := createNamespace(t, "mc-sts")
	const name = "ring"
	applySample(t, ns, "cache_v1alpha1_memcached_statefulset.yaml")
	want := []string{}
	for i := range 3 {
		want = append(want, fmt.Sprintf("ring-%d.ring.%s.svc:11211", i, ns))
	}
	mc := &cachev1alpha1.Memcached{}
	g.Eventually(func(g Gomega) {
		pods := runningPods(g, ns, name)
		g.Expect(pods).To(HaveLen(3))
		g.Expect(cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, mc)).To(Succeed())
		g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
		g.Expect(meta.IsStatusConditionTrue(mc.Status.Conditions, cachev1alpha1.ConditionAvailable)).To(BeTrue(), "conditions %v", mc.Status.Conditions)
		g.Expect(mc.Status.Servers).To(Equal(want))
	}).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	out, err := kc.Kubectl(ctx, "-n", ns, "get", "mc", name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`(?m)^ring\s+3\s+3\s+True\s+false\s+false\s+StatefulSet\s+`), "printer columns:\n%s", out)
}

// newCertificate is the data cert-manager writes into a kubernetes.io/tls
// Secret: a certificate of a new CA, its key and the CA.
func newCertificate(t *testing.T, caName string) map[string][]byte {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	caCert, err := x509.ParseCertificate(caDER)
	g.Expect(err).NotTo(HaveOccurred())
	key := newKey(t)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sessions"}, DNSNames: []string{"sessions"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	g.Expect(err).NotTo(HaveOccurred())
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"ca.crt":                pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return k
}
