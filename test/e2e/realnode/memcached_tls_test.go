package realnode

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// The TLS+auth sample on real pods, with its Secret made by hand (the
// sample's "without cert-manager" way): clients need the CA and a password;
// a renewal under the same CA is loaded by the running memcached processes
// (same pods, same containers, same items, the new serial served); a CA
// change replaces the pods one at a time.
func TestMemcachedTLSRenewalOnRealPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	users, mc := tlsAuthSample(t, ns)
	ca := newE2ECA(t, "sessions CA one")
	must(t, k8s.Create(ctx, users))
	must(t, k8s.Create(ctx, tlsSecretOf(t, ns, ca)))
	must(t, k8s.Create(ctx, mc))
	size := int(*mc.Spec.Size)
	servers := waitServers(t, mc, size, 5*time.Minute)
	user, password := firstUser(t, users)

	// Who may use the cache.
	for i, addr := range servers {
		key, value := fmt.Sprintf("k%d", i), fmt.Sprintf("v-%s-%d", ns, i)
		if got, err := tlsTalk(addr, ca, user, password, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(value), value, key), 2); err != nil ||
			got != fmt.Sprintf("STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value) {
			t.Fatalf("%s: a client with the CA and a password: %q, %v", addr, got, err)
		}
		if _, err := tlsTalk(addr, newE2ECA(t, "stranger"), "", "", "version\r\n", 1); err == nil {
			t.Fatalf("%s: a client without the CA was served", addr)
		}
		if got, err := tlsTalk(addr, ca, "", "", fmt.Sprintf("get %s\r\n", key), 1); err == nil && strings.Contains(got, value) {
			t.Fatalf("%s: a client without a password read %q", addr, got)
		}
	}
	t.Logf("%d servers: a client with the CA and %s's password sets and gets; without the CA or without a password it is refused", size, user)

	// A renewal under the same CA: in place.
	pods := memcachedPods(t, ns, mc.Name)
	firstSerial := servedSerialOf(t, servers[0], ca)
	renewed := tlsSecretOf(t, ns, ca)
	newSerial := e2eSerial(t, renewed)
	updated := time.Now()
	must(t, k8s.Update(ctx, withResourceVersion(t, renewed)))
	seen := map[string]float64{}
	eventually(t, 5*time.Minute, "every server serving the renewed certificate", func() error {
		var waiting []string
		for _, addr := range servers {
			if _, ok := seen[addr]; ok {
				continue
			}
			if got := servedSerialOf(t, addr, ca); got != newSerial {
				waiting = append(waiting, fmt.Sprintf("%s serves %s", addr, got))
				continue
			}
			seen[addr] = time.Since(updated).Seconds()
		}
		if len(waiting) > 0 {
			return fmt.Errorf("want %s: %s", newSerial, strings.Join(waiting, "; "))
		}
		return nil
	})
	var perServer []string
	for _, addr := range servers {
		perServer = append(perServer, fmt.Sprintf("%s %.1fs", addr, seen[addr]))
	}
	t.Logf("renewal under the same CA: serial %s -> %s served by all %d servers %.1fs after the Secret update (each: %s)",
		firstSerial, newSerial, size, time.Since(updated).Seconds(), strings.Join(perServer, ", "))
	for i, addr := range servers {
		key, value := fmt.Sprintf("k%d", i), fmt.Sprintf("v-%s-%d", ns, i)
		if got, err := tlsTalk(addr, ca, user, password, fmt.Sprintf("get %s\r\n", key), 1); err != nil || !strings.Contains(got, value) {
			t.Fatalf("%s: the item set before the renewal: %q, %v", addr, got, err)
		}
	}
	after := memcachedPods(t, ns, mc.Name)
	if !samePodsAndContainers(pods, after) {
		t.Fatalf("the renewal replaced pods or containers:\nbefore %v\nafter  %v", podIdentities(pods), podIdentities(after))
	}
	t.Logf("items set before are read after; pods and containers unchanged: %v", podIdentities(after))
	logAgentDelays(t, ns, after)
	waitRenewalStatus(t, mc, newSerial, cachev1alpha1.RenewalInPlace)

	// A CA change: the pods are replaced one at a time.
	ca2 := newE2ECA(t, "sessions CA two")
	changed := tlsSecretOf(t, ns, ca2)
	oldUIDs := map[string]bool{}
	for _, p := range after {
		oldUIDs[string(p.UID)] = true
	}
	start := time.Now()
	must(t, k8s.Update(ctx, withResourceVersion(t, changed)))
	minReady, samples := size, 0
	eventually(t, 10*time.Minute, "every pod replaced and ready", func() error {
		list := memcachedPods(t, ns, mc.Name)
		ready, fresh := 0, 0
		for _, p := range list {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
				if !oldUIDs[string(p.UID)] {
					fresh++
				}
			}
		}
		samples++
		minReady = min(minReady, ready)
		if fresh != size || len(list) != size {
			return fmt.Errorf("%d pods, %d ready, %d ready new ones", len(list), ready, fresh)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("CA change: all %d pods replaced and ready %.1fs after the Secret update; minimum ready seen %d in %d samples", size, took.Seconds(), minReady, samples)
	if minReady < size-1 {
		t.Fatalf("only %d of %d pods were ready at one sample: the rollout must keep size-1 ready", minReady, size)
	}
	servers = waitServers(t, mc, size, 5*time.Minute)
	for _, addr := range servers {
		if got := servedSerialOf(t, addr, ca2); got != e2eSerial(t, changed) {
			t.Fatalf("%s serves %s after the CA change, want %s", addr, got, e2eSerial(t, changed))
		}
	}
	waitRenewalStatus(t, mc, e2eSerial(t, changed), cachev1alpha1.RenewalRolled)
}

// tlsAuthSample is the sample's auth Secret and Memcached, in ns, on the
// real node's images.
func tlsAuthSample(t *testing.T, ns string) (*corev1.Secret, *cachev1alpha1.Memcached) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "samples", "cache_v1alpha1_memcached_tls_auth.yaml"))
	must(t, err)
	var users *corev1.Secret
	var mc *cachev1alpha1.Memcached
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		must(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Secret":
			users = &corev1.Secret{}
			must(t, yaml.Unmarshal([]byte(doc), users))
		case "Memcached":
			mc = &cachev1alpha1.Memcached{}
			must(t, yaml.Unmarshal([]byte(doc), mc))
		}
	}
	if users == nil || mc == nil || mc.Spec.TLS == nil || mc.Spec.Auth == nil || mc.Spec.Size == nil {
		t.Fatal("the TLS+auth sample lost its auth Secret or its Memcached with tls and auth")
	}
	users.Namespace, mc.Namespace = ns, ns
	if users.Data == nil {
		users.Data = map[string][]byte{}
	}
	for k, v := range users.StringData {
		users.Data[k] = []byte(v)
	}
	users.StringData = nil
	onTheNode(t, &mc.Spec)
	return users, mc
}

func firstUser(t *testing.T, users *corev1.Secret) (string, string) {
	t.Helper()
	line, _, _ := strings.Cut(string(users.Data[cachev1alpha1.AuthFileKey]), "\n")
	user, password, ok := strings.Cut(line, ":")
	if !ok {
		t.Fatalf("the sample's auth file starts with %q", line)
	}
	return user, password
}

func waitRenewalStatus(t *testing.T, mc *cachev1alpha1.Memcached, serial string, mode cachev1alpha1.RenewalMode) {
	t.Helper()
	eventually(t, 3*time.Minute, "status.tlsCertificate "+serial+" "+string(mode), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(mc), mc); err != nil {
			return err
		}
		c := mc.Status.TLSCertificate
		if c == nil || c.SerialNumber != serial || c.LastRenewal == nil || c.LastRenewal.Mode != mode {
			return fmt.Errorf("status.tlsCertificate = %+v", c)
		}
		return nil
	})
	t.Logf("status.tlsCertificate: serial %s, notAfter %s, lastRenewal %s at %s (previous %s)", mc.Status.TLSCertificate.SerialNumber,
		mc.Status.TLSCertificate.NotAfter.UTC().Format(time.RFC3339), mode, mc.Status.TLSCertificate.LastRenewal.Time.UTC().Format(time.RFC3339),
		mc.Status.TLSCertificate.LastRenewal.PreviousSerialNumber)
}

func memcachedPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	must(t, k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}))
	return list.Items
}

// podIdentities: each pod's UID and its containers' IDs and restarts.
func podIdentities(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		id := string(p.UID)
		for _, c := range p.Status.ContainerStatuses {
			cid := strings.TrimPrefix(c.ContainerID, "containerd://")
			id += fmt.Sprintf(" %s=%s/r%d", c.Name, cid[:min(12, len(cid))], c.RestartCount)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func samePodsAndContainers(a, b []corev1.Pod) bool {
	return slices.Equal(podIdentities(a), podIdentities(b))
}

// logAgentDelays logs what each pod's TLS agent measured: from the kubelet's
// swap of the volume to its detection.
func logAgentDelays(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		raw, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "tls-agent"}).DoRaw(context.Background())
		if err != nil {
			t.Logf("%s: the agent's log is not readable here (%v)", p.Name, err)
			continue
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, "reloaded the certificate in place") {
				t.Logf("%s agent: %s", p.Name, l)
			}
		}
	}
}

func withResourceVersion(t *testing.T, sec *corev1.Secret) *corev1.Secret {
	t.Helper()
	live := &corev1.Secret{}
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(sec), live))
	live.Data = sec.Data
	return live
}

// tlsTalk connects with TLS trusting only ca (the sample's names), logs in
// when user is set, sends script and reads replies replies (each ends with
// a line END, STORED, VERSION or an error).
func tlsTalk(addr string, ca *e2eCA, user, password, script string, replies int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := node.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	conn := tls.Client(raw, ca.clientConfig())
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := conn.HandshakeContext(ctx); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	if user != "" {
		creds := user + " " + password
		if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(creds), creds); err != nil {
			return "", err
		}
		if line, err := r.ReadString('\n'); err != nil || line != "STORED\r\n" {
			return line, fmt.Errorf("login: %q %v", line, err)
		}
	}
	if _, err := conn.Write([]byte(script)); err != nil {
		return "", err
	}
	var b strings.Builder
	for n := 0; n < replies; {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if strings.HasPrefix(line, "END") || strings.HasPrefix(line, "STORED") || strings.Contains(line, "ERROR") || strings.HasPrefix(line, "VERSION") {
			n++
		}
	}
	return b.String(), nil
}

func servedSerialOf(t *testing.T, addr string, ca *e2eCA) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := node.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "unreachable: " + err.Error()
	}
	conn := tls.Client(raw, ca.clientConfig())
	defer func() { _ = conn.Close() }()
	if err := conn.HandshakeContext(ctx); err != nil {
		return "handshake: " + err.Error()
	}
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// e2eCA signs the sample's server certificates.
type e2eCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newE2ECA(t *testing.T, cn string) *e2eCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: e2eRandomSerial(t), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	return &e2eCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *e2eCA) clientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, ServerName: "sessions", MinVersion: tls.VersionTLS12}
}

// tlsSecretOf is the sample's sessions-tls Secret as cert-manager writes it,
// with a new certificate of ca.
func tlsSecretOf(t *testing.T, ns string, ca *e2eCA) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: e2eRandomSerial(t), Subject: pkix.Name{CommonName: "sessions"}, DNSNames: []string{"sessions", "*.sessions"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	must(t, err)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sessions-tls", Labels: map[string]string{cachev1alpha1.UsableLabel: "true"}},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), "ca.crt": ca.pem},
	}
}

func e2eSerial(t *testing.T, sec *corev1.Secret) string {
	t.Helper()
	block, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
	c, err := x509.ParseCertificate(block.Bytes)
	must(t, err)
	return c.SerialNumber.Text(16)
}

func e2eRandomSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	must(t, err)
	return n
}
