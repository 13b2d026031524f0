package tlsreload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// testCA signs the certificates of one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	return &testCA{cert: must(x509.ParseCertificate(der)), key: key, pem: pemOf("CERTIFICATE", der)}
}

// issue signs a server certificate that is also a client certificate (the
// agent presents it with mutual TLS).
func (ca *testCA) issue(t *testing.T) (certPEM, keyPEM []byte, serial string) {
	t.Helper()
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: "cache"}, DNSNames: []string{"cache"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key))
	return pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(key))), tmpl.SerialNumber.Text(16)
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func randomSerial() *big.Int { return must(rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// volume writes files the way the kubelet's atomic writer does: a
// timestamped directory, ..data pointing at it, each file a link through
// ..data; an update swaps ..data in one rename.
type volume struct {
	dir string
	n   int
}

func newVolume(t *testing.T, files map[string][]byte) *volume {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// memcached re-reads the files after dropping to its user.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	v := &volume{dir: dir}
	v.update(t, files)
	for name := range files {
		if err := os.Symlink(filepath.Join(dataLink, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *volume) update(t *testing.T, files map[string][]byte) {
	t.Helper()
	v.n++
	version := fmt.Sprintf("..version_%d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(v.dir, version, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, dataLink)); err != nil {
		t.Fatal(err)
	}
}

// startMemcached runs the machine's memcached with TLS on the files of v
// (and auth and mutual TLS when asked) and stops it in t.Cleanup.
func startMemcached(t *testing.T, v *volume, authFile string, mutual bool) (addr string, proc *os.Process, stderr *testenv.SyncBuffer) {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatal("the real-memcached tests need Debian's memcached (apt-get install memcached)")
	}
	l := must(net.Listen("tcp", "127.0.0.1:0"))
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	tlsOpts := fmt.Sprintf("ssl_chain_cert=%s,ssl_key=%s", filepath.Join(v.dir, CertFile), filepath.Join(v.dir, KeyFile))
	if mutual {
		tlsOpts += ",ssl_ca_cert=" + filepath.Join(v.dir, ClientCAFile) + ",ssl_verify_mode=2"
	}
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "16", "-Z", "-o", tlsOpts}
	if authFile != "" {
		args = append(args, "-Y", authFile)
	}
	if os.Geteuid() == 0 {
		name := "nobody"
		if _, err := user.Lookup("memcache"); err == nil {
			name = "memcache"
		}
		args = append(args, "-u", name)
	}
	cmd := exec.Command(bin, args...)
	stderr = &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitFor(t, 20*time.Second, "memcached listening on "+addr, func() error {
		select {
		case <-done:
			t.Fatalf("memcached exited: %s", stderr.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return addr, cmd.Process, stderr
}

// waitFor polls check until it succeeds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, 50*time.Millisecond, timeout, what, check)
}

// servedSerial is the serial a client trusting only ca sees.
func servedSerial(addr string, ca *testCA, client *tls.Certificate) (string, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: pool, ServerName: "cache", MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Text(16), nil
}
