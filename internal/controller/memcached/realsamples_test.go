package memcached

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/test/testenv"
)

// sampleObjects are the objects of one config/samples file: its Memcached,
// its Secrets, and the Secret each cert-manager Certificate would write
// (with a certificate of ca).
type sampleObjects struct {
	memcached *cachev1alpha1.Memcached
	secrets   map[string]*corev1.Secret
}

func loadSample(t *testing.T, path string, ca *testCA) sampleObjects {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := sampleObjects{secrets: map[string]*corev1.Secret{}}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil || len(u.Object) == 0 {
			continue
		}
		switch u.GetKind() {
		case "Memcached":
			mc := &cachev1alpha1.Memcached{}
			mustConvert(t, doc, mc)
			mc.Namespace = "shop"
			if tls := mc.Spec.TLS; tls != nil && tls.IssuerRef != nil {
				// What cert-manager writes for the owned Certificate
				// (certificate_object.go, labelled usable by its template); the
				// reconciler here has no apiserver to apply it to, so the
				// sample runs as issued.
				out.secrets[tls.SecretName] = tlsSecret(t, tls.SecretName, ca)
				tls.IssuerRef, tls.DNSNames = nil, nil
			}
			out.memcached = mc
		case "Secret":
			sec := &corev1.Secret{}
			mustConvert(t, doc, sec)
			if sec.Data == nil {
				sec.Data = map[string][]byte{}
			}
			for k, v := range sec.StringData {
				sec.Data[k] = []byte(v)
			}
			sec.Namespace, sec.StringData = "shop", nil
			out.secrets[sec.Name] = sec
		case "Certificate":
			name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
			labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "secretTemplate", "labels")
			sec := tlsSecret(t, name, ca)
			sec.Labels = labels
			out.secrets[name] = sec
		}
	}
	if out.memcached == nil {
		t.Fatalf("%s has no Memcached", path)
	}
	return out
}

func mustConvert(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("decoding a sample: %v", err)
	}
}

// Every Memcached sample runs in the real memcached as the controller
// would run it: accepted by the controller, its Secrets usable, its item
// memory as asked, and served to a client that speaks what the sample
// requires (TLS, authentication with the first user of its auth file).
func TestSamplesRunInRealMemcached(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "cache_v1alpha1_memcached*.yaml"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("samples %v (%v): want the plain, TLS+auth, StatefulSet and overrides samples", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ca := newTestCA(t, "sample CA")
			sample := loadSample(t, path, ca)
			mc := sample.memcached
			var objs []*corev1.Secret
			var stored []client.Object
			for _, s := range sample.secrets {
				objs, stored = append(objs, s), append(stored, s.DeepCopy())
			}
			r := &Reconciler{APIReader: fakeAPIServer(t, stored...), Keys: fingerprint.StaticSource(testKey(t))}
			p := preparedPod(t, r, mc, objs...)
			srv := startPod(t, p)

			var c *mcConn
			switch {
			case mc.Spec.TLS != nil && mc.Spec.TLS.ClientCA != nil:
				// Mutual TLS: a client certificate of the sample's CA.
				c, err = dialTLS(srv.addr, trusting(ca, ca.clientCert(t, "sample client")))
			case mc.Spec.TLS != nil:
				c, err = dialTLS(srv.addr, trusting(ca))
			default:
				c, err = dialPlain(srv.addr)
			}
			if err != nil {
				t.Fatalf("connecting: %v (memcached said: %s)", err, srv.output())
			}
			defer c.Close()
			if mc.Spec.Auth != nil {
				first, _, _ := strings.Cut(string(sample.secrets[mc.Spec.Auth.SecretName].Data[cachev1alpha1.AuthFileKey]), "\n")
				user, password, _ := strings.Cut(first, ":")
				if r, err := c.authenticate(user, password); err != nil || r != "STORED" {
					t.Fatalf("authenticating as %s: %q, %v", user, r, err)
				}
			}
			if err := c.setGet("sample", "value"); err != nil {
				t.Fatal(err)
			}
			st, err := c.statsSettings()
			if err != nil {
				t.Fatal(err)
			}
			if want := resolved(t, mc).MemoryMiB; st["maxbytes"] != strconv.Itoa(int(want)<<20) {
				t.Errorf("maxbytes %s, want %d MiB", st["maxbytes"], want)
			}
		})
	}
}
