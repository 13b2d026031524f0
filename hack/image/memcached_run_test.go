package main

import (
	"bufio"
	"bytes"
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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startInImage runs the image's memcached as a container would, minus the
// cgroups: chrooted into the unpacked image (so only the image's loader
// and libraries can be loaded, through the paths the ELF files name), as
// the image's user 11211 (a user namespace maps it to the caller, so the
// test needs no privilege). memcached picks a free loopback port (-p -1)
// and writes it to MEMCACHED_PORT_FILENAME; the address is returned.
func startInImage(t *testing.T, root string, args ...string) string {
	t.Helper()
	addr, err := launchInImage(t, root, args...)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func launchInImage(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, memcachedProgram, append([]string{"-l", "127.0.0.1", "-p", "-1", "-U", "0"}, args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"MEMCACHED_PORT_FILENAME=/tmp/ports"}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:                     root,
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: memcacheUID, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: memcacheUID, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
	ports := filepath.Join(root, "tmp/ports")
	_ = os.Remove(ports)
	if err := cmd.Start(); err != nil {
		cancel()
		return "", fmt.Errorf("starting %s chrooted in %s in a user namespace: %w", memcachedProgram, root, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	// memcached renames the file into place once it listens.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			return "", fmt.Errorf("memcached %v exited: %w\n%s", args, err, stderr.String())
		case <-deadline:
			return "", fmt.Errorf("memcached %v wrote no port file in 30s\n%s", args, stderr.String())
		case <-tick.C:
		}
		b, err := os.ReadFile(ports)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if port, ok := strings.CutPrefix(line, "TCP INET: "); ok {
				return net.JoinHostPort("127.0.0.1", port), nil
			}
		}
	}
}

// converse sends each line and reads one reply line per line sent.
func converse(t *testing.T, conn net.Conn, lines ...string) []string {
	t.Helper()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var replies []string
	for _, l := range lines {
		if _, err := fmt.Fprintf(conn, "%s\r\n", l); err != nil {
			t.Fatal(err)
		}
		reply, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v (replies so far %q)", l, err, replies)
		}
		replies = append(replies, strings.TrimRight(reply, "\r\n"))
	}
	return replies
}

func TestMemcachedRunsFromTheImage(t *testing.T) {
	mc := mustMemcachedImage(t)
	root := unpack(t, mc.Image)
	addr := startInImage(t, root)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	got := converse(t, conn, "version", "set k 0 0 5\r\nhello", "stats")
	if got[0] != "VERSION "+mc.Tag || got[1] != "STORED" || !strings.HasPrefix(got[2], "STAT pid ") {
		t.Fatalf("replies %q, want VERSION %s, STORED, STAT pid", got, mc.Tag)
	}
	t.Logf("%s: %q", addr, got)
}

// TestMemcachedFromTheImageNeedsItsLibraries is the control of the test
// above: without one of the image's libraries, the same start fails, so
// the libraries it runs on are the image's, not the machine's.
func TestMemcachedFromTheImageNeedsItsLibraries(t *testing.T) {
	mc := mustMemcachedImage(t)
	root := unpack(t, mc.Image)
	triplet := multiarch[elfMachine(t, filepath.Join(root, memcachedProgram))]
	lib, err := inRoot(root, "/usr/lib/"+triplet+"/libevent-2.1.so.7")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, lib)); err != nil {
		t.Fatal(err)
	}
	_, err = launchInImage(t, root)
	if err == nil || !strings.Contains(err.Error(), "libevent-2.1.so.7") {
		t.Fatalf("memcached started without its libevent, or failed otherwise: %v", err)
	}
	t.Log(err)
}

// TestMemcachedTLSAndAuthFromTheImage runs the image's memcached with the
// options the operator renders for the TLS+auth sample (-Z with a
// certificate and key, -Y with an auth file): a TLS client that trusts the
// CA and logs in is served; one that does not log in, or speaks plain TCP,
// is not.
func TestMemcachedTLSAndAuthFromTheImage(t *testing.T) {
	mc := mustMemcachedImage(t)
	root := unpack(t, mc.Image)
	ca, certPEM, keyPEM := testCertificates(t)
	for p, content := range map[string][]byte{"run/tls/tls.crt": certPEM, "run/tls/tls.key": keyPEM, "run/auth/authfile": []byte("alice:s3cret\n")} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := startInImage(t, root, "-Z", "-o", "ssl_chain_cert=/run/tls/tls.crt,ssl_key=/run/tls/tls.key", "-Y", "/run/auth/authfile")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	dialTLS := func() net.Conn {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "memcached.test", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	conn := dialTLS()
	state := conn.(*tls.Conn).ConnectionState()
	if got := converse(t, conn, "version"); got[0] != "CLIENT_ERROR unauthenticated" {
		t.Errorf("without logging in: %q", got)
	}
	conn = dialTLS()
	got := converse(t, conn, "set auth 0 0 12\r\nalice s3cret", "version", "set k 0 0 2\r\nok", "get k")
	if got[0] != "STORED" || got[1] != "VERSION "+mc.Tag || got[2] != "STORED" || got[3] != "VALUE k 0 2" {
		t.Fatalf("logged in over TLS: %q", got)
	}
	t.Logf("TLS %s %s, logged in: %q", tls.VersionName(state.Version), tls.CipherSuiteName(state.CipherSuite), got)

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	_ = plain.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprint(plain, "version\r\n"); err != nil {
		t.Fatal(err)
	}
	reply, _ := bufio.NewReader(plain).ReadString('\n')
	if strings.Contains(reply, "VERSION") {
		t.Errorf("plain TCP to the TLS port was answered: %q", reply)
	}
}

// testCertificates returns a CA and a server certificate it signed for
// memcached.test and 127.0.0.1, with the server's key, in PEM.
func testCertificates(t *testing.T) (*x509.Certificate, []byte, []byte) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "memcached.test"},
		DNSNames: []string{"memcached.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
