package memcached

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// The real memcached with the TLS and auth configuration the controller
// generates: the pod's exact arguments and mounted files (realserver_test.go).

// tlsSecret is a kubernetes.io/tls Secret as cert-manager writes it, with
// the issuing CA under ca.crt.
func tlsSecret(t *testing.T, name string, ca *testCA) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, testServerName, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return usableSecret(name, corev1.SecretTypeTLS, map[string][]byte{
		corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, cachev1alpha1.DefaultClientCAKey: ca.pem,
	})
}

func authSecret(name, authfile string) *corev1.Secret {
	return usableSecret(name, corev1.SecretTypeOpaque, map[string][]byte{cachev1alpha1.AuthFileKey: []byte(authfile)})
}

func usableSecret(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{cachev1alpha1.UsableLabel: "true"}},
		Type:       typ, Data: data,
	}
}

func byName(secrets ...*corev1.Secret) map[string]*corev1.Secret {
	out := map[string]*corev1.Secret{}
	for _, s := range secrets {
		out[s.Name] = s
	}
	return out
}

// tlsRefused: a TLS client with cfg cannot use the server, whether the
// handshake fails or (TLS 1.3: the client certificate is checked after the
// client's side of the handshake) the first command does.
func tlsRefused(addr string, cfg *tls.Config) error {
	c, err := dialTLS(addr, cfg)
	if err != nil {
		return nil
	}
	defer c.Close()
	if r, err := c.command("version"); err == nil {
		return fmt.Errorf("the client was served: %q", r)
	}
	return nil
}

// tlsServes: a TLS client with cfg can store and read a value.
func tlsServes(addr string, cfg *tls.Config) error {
	c, err := dialTLS(addr, cfg)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer c.Close()
	return c.setGet("k", "v")
}

func TestRealMemcachedTLS(t *testing.T) {
	ca := newTestCA(t, "server CA")
	cert := tlsSecret(t, "cert", ca)
	for _, minVersion := range []cachev1alpha1.TLSVersion{cachev1alpha1.TLSVersion12, cachev1alpha1.TLSVersion13} {
		t.Run(string(minVersion), func(t *testing.T) {
			mc := realMemcached(cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert", MinVersion: minVersion}})
			srv := startPod(t, renderPod(t, mc, resolved(t, mc), byName(cert)))

			if err := tlsServes(srv.addr, trusting(ca)); err != nil {
				t.Fatalf("a client trusting the CA: %v (memcached said: %s)", err, srv.output())
			}
			if err := plaintextRefused(srv.addr); err != nil {
				t.Error(err)
			}
			if err := tlsRefused(srv.addr, trusting(newTestCA(t, "another CA"))); err != nil {
				t.Errorf("a client trusting another CA: %v", err)
			}
			old := trusting(ca)
			old.MaxVersion = tls.VersionTLS12
			err := tlsServes(srv.addr, old)
			if minVersion == cachev1alpha1.TLSVersion13 && err == nil {
				t.Error("a TLS 1.2 client was served although minVersion is TLS1.3")
			}
			if minVersion == cachev1alpha1.TLSVersion12 && err != nil {
				t.Errorf("a TLS 1.2 client: %v", err)
			}
		})
	}
}

func TestRealMemcachedMutualTLS(t *testing.T) {
	serverCA, clientCA := newTestCA(t, "server CA"), newTestCA(t, "client CA")
	cert := tlsSecret(t, "cert", serverCA)
	clients := usableSecret("clients", corev1.SecretTypeOpaque, map[string][]byte{"bundle.pem": clientCA.pem})
	mc := realMemcached(cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert",
		ClientCA: &cachev1alpha1.SecretKeySelector{Name: "clients", Key: "bundle.pem"}}})
	srv := startPod(t, renderPod(t, mc, resolved(t, mc), byName(cert, clients)))

	if err := tlsServes(srv.addr, trusting(serverCA, clientCA.clientCert(t, "app"))); err != nil {
		t.Fatalf("a client with a certificate of the client CA: %v (memcached said: %s)", err, srv.output())
	}
	if err := tlsRefused(srv.addr, trusting(serverCA)); err != nil {
		t.Errorf("a client without a certificate: %v", err)
	}
	if err := tlsRefused(srv.addr, trusting(serverCA, newTestCA(t, "rogue CA").clientCert(t, "app"))); err != nil {
		t.Errorf("a client with a certificate of another CA: %v", err)
	}
	if err := plaintextRefused(srv.addr); err != nil {
		t.Error(err)
	}
}

// The exporter sidecar, with mutual TLS, presents the server's own
// certificate (from the same mounted files) and skips the name check (it
// dials 127.0.0.1): that works when the client CA is the CA that issued
// the server's certificate, as with cert-manager's ca.crt.
func TestRealMemcachedAcceptsTheExportersClientCertificate(t *testing.T) {
	ca := newTestCA(t, "CA")
	cert := tlsSecret(t, "cert", ca)
	mc := realMemcached(cachev1alpha1.MemcachedSpec{
		TLS:      &cachev1alpha1.TLSSpec{SecretName: "cert", ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert"}},
		Exporter: &cachev1alpha1.ExporterSpec{Enabled: true},
	})
	s := resolved(t, mc)
	p := renderPod(t, mc, s, byName(cert))
	srv := startPod(t, p)

	exporter := containerNamed(t, p.template.Spec, containerExporter)
	args := strings.Join(exporter.Args, " ")
	for _, want := range []string{"--memcached.tls.enable", "--memcached.tls.insecure-skip-verify",
		"--memcached.tls.cert-file=" + tlsDir + "/tls.crt", "--memcached.tls.key-file=" + tlsDir + "/tls.key"} {
		if !strings.Contains(args, want) {
			t.Fatalf("exporter args %q lack %s", args, want)
		}
	}
	pair, err := tls.X509KeyPair(cert.Data[corev1.TLSCertKey], cert.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	// What the exporter's flags configure.
	cfg := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12} //nolint:gosec // as the exporter, which dials 127.0.0.1
	c, err := dialTLS(srv.addr, cfg)
	if err != nil {
		t.Fatalf("the exporter's handshake: %v (memcached said: %s)", err, srv.output())
	}
	defer c.Close()
	st, err := c.statsSettings()
	if err != nil || st["ssl_enabled"] != "yes" {
		t.Fatalf("the exporter's stats: %v, %v", st["ssl_enabled"], err)
	}
}

func TestRealMemcachedAuth(t *testing.T) {
	users := authSecret("users", "alice:correct-horse\nbob:battery:staple\n")
	mc := realMemcached(cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}})
	srv := startPod(t, renderPod(t, mc, resolved(t, mc), byName(users)))

	tests := []struct {
		name, user, password, want string
	}{
		{"wrong password", "alice", "battery:staple", "CLIENT_ERROR authentication failure"},
		{"unknown user", "mallory", "correct-horse", "CLIENT_ERROR authentication failure"},
		{"no password", "alice", "", "CLIENT_ERROR bad authentication token format"},
		{"first user", "alice", "correct-horse", "STORED"},
		{"second user", "bob", "battery:staple", "STORED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := dialPlain(srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if r, err := c.authenticate(tt.user, tt.password); err != nil || !strings.HasPrefix(r, tt.want) {
				t.Fatalf("authenticating as %s: %q, %v; want %q (memcached said: %s)", tt.user, r, err, tt.want, srv.output())
			}
			if tt.want != "STORED" {
				return
			}
			if err := c.setGet("k-"+tt.user, "v"); err != nil {
				t.Errorf("after authenticating: %v", err)
			}
		})
	}
	t.Run("unauthenticated", func(t *testing.T) {
		c, err := dialPlain(srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r, _ := c.command("get k-alice"); !strings.Contains(r, "unauthenticated") {
			t.Errorf("an unauthenticated get got %q", r)
		}
	})
}

// The configuration of config/samples/cache_v1alpha1_memcached_tls_auth.yaml:
// TLS and auth together.
func TestRealMemcachedTLSAndAuth(t *testing.T) {
	ca := newTestCA(t, "CA")
	cert, users := tlsSecret(t, "cert", ca), authSecret("users", "app:s3cret\n")
	mc := realMemcached(cachev1alpha1.MemcachedSpec{
		TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}, Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}})
	srv := startPod(t, renderPod(t, mc, resolved(t, mc), byName(cert, users)))

	c, err := dialTLS(srv.addr, trusting(ca))
	if err != nil {
		t.Fatalf("handshake: %v (memcached said: %s)", err, srv.output())
	}
	defer c.Close()
	if r, err := c.authenticate("app", "wrong"); err != nil || r != "CLIENT_ERROR authentication failure" {
		t.Fatalf("wrong password: %q, %v", r, err)
	}
	if r, err := c.authenticate("app", "s3cret"); err != nil || r != "STORED" {
		t.Fatalf("right password: %q, %v", r, err)
	}
	if err := c.setGet("k", "v"); err != nil {
		t.Fatal(err)
	}
	st, err := c.statsSettings()
	if err != nil {
		t.Fatal(err)
	}
	if st["ssl_enabled"] != "yes" || !strings.HasSuffix(st["auth_enabled_ascii"], "/etc/memcached/auth/authfile") ||
		st["auth_enabled_sasl"] != "no" || st["binding_protocol"] != "ascii" {
		t.Errorf("stats settings: ssl %s, ascii auth %s, sasl %s, protocol %s", st["ssl_enabled"], st["auth_enabled_ascii"], st["auth_enabled_sasl"], st["binding_protocol"])
	}
	if err := plaintextRefused(srv.addr); err != nil {
		t.Error(err)
	}
}

// A renewal: the TLS Secret gets a certificate of a new CA (and the new CA
// as ca.crt, the client CA). The controller sees the Secret's data change
// in its fingerprint on the pod template, so the workload replaces its
// pods; a new pod mounts the new files and a client that trusts only the
// new CA connects. The old process keeps the certificate it loaded even
// after the kubelet rewrote its files, which is why the rollout is needed.
func TestRealMemcachedCertificateRenewalRollsOut(t *testing.T) {
	oldCA, newCA := newTestCA(t, "CA 2024"), newTestCA(t, "CA 2025")
	cert := tlsSecret(t, "cert", oldCA)
	mc := realMemcached(cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert",
		ClientCA: &cachev1alpha1.SecretKeySelector{Name: "cert"}}})
	apiserver := fakeAPIServer(t, cert)
	r := &Reconciler{APIReader: apiserver, Keys: fingerprint.StaticSource(testKey(t))}

	before := preparedPod(t, r, mc, cert)
	oldPod := startPod(t, before)
	if err := tlsServes(oldPod.addr, trusting(oldCA, oldCA.clientCert(t, "app"))); err != nil {
		t.Fatalf("before the renewal: %v", err)
	}

	renewed := tlsSecret(t, "cert", newCA)
	cert.Data = renewed.Data
	if err := apiserver.Update(context.Background(), cert); err != nil {
		t.Fatal(err)
	}
	after := preparedPod(t, r, mc, cert)
	oldHash, newHash := before.template.Annotations[AnnotationSecretHash], after.template.Annotations[AnnotationSecretHash]
	if oldHash == "" || oldHash == newHash {
		t.Fatalf("secret hash %q -> %q: the pod template must change, or nothing rolls", oldHash, newHash)
	}
	if before.template.Annotations[AnnotationConfigHash] != after.template.Annotations[AnnotationConfigHash] {
		t.Error("the config hash changed too: a renewal must be told apart from a configuration change")
	}
	for _, data := range []string{string(renewed.Data[corev1.TLSPrivateKeyKey]), string(renewed.Data[corev1.TLSCertKey])} {
		if strings.Contains(newHash, data) || strings.Contains(fmt.Sprint(after.template), data) {
			t.Fatal("Secret data in the pod template")
		}
	}

	newPod := startPod(t, after)
	if err := tlsServes(newPod.addr, trusting(newCA, newCA.clientCert(t, "app"))); err != nil {
		t.Fatalf("a client trusting only the new CA: %v (memcached said: %s)", err, newPod.output())
	}
	if err := tlsRefused(newPod.addr, trusting(oldCA, oldCA.clientCert(t, "app"))); err != nil {
		t.Errorf("a client of the old CA on the renewed pod: %v", err)
	}

	before.rewriteFiles(t, byName(cert))
	if err := tlsRefused(oldPod.addr, trusting(newCA, newCA.clientCert(t, "app"))); err != nil {
		t.Errorf("memcached reloaded the rewritten files by itself (%v): the rollout could be an in-place reload", err)
	}
}

// preparedPod is what the controller renders for mc: its settings and the
// Secrets' fingerprint as a reconcile computes them, then the pod.
func preparedPod(t *testing.T, r *Reconciler, mc *cachev1alpha1.Memcached, secrets ...*corev1.Secret) *testPod {
	t.Helper()
	s, obs := r.prepare(context.Background(), mc)
	if !obs.mayApply() {
		t.Fatalf("the reconcile would apply nothing: invalid %v, secret %q, key %v, apiserver %v", obs.invalid, obs.secretNotUsable, obs.keyErr, obs.applyErr)
	}
	return renderPod(t, mc, s, byName(secrets...))
}

func fakeAPIServer(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&discoveryv1.EndpointSlice{}, indexSliceService, sliceService).Build()
}

func testKey(t *testing.T) *fingerprint.Key {
	t.Helper()
	k, err := fingerprint.NewKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
