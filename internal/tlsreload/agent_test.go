package tlsreload

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// agentFixture is a real memcached with TLS on a kubelet-style volume and
// an agent beside it.
type agentFixture struct {
	vol    *volume
	addr   string
	ca     *testCA
	client *tls.Certificate
	logs   *testenv.SyncBuffer
	mc     *testenv.SyncBuffer
	pid    int
	serial string
}

func startFixture(t *testing.T, auth, mutual bool) *agentFixture {
	t.Helper()
	f := &agentFixture{ca: newCA(t, "cache-ca"), logs: &testenv.SyncBuffer{}}
	certPEM, keyPEM, serial := f.ca.issue(t)
	f.serial = serial
	files := map[string][]byte{CertFile: certPEM, KeyFile: keyPEM}
	if mutual {
		files[ClientCAFile] = f.ca.pem
		c, k, _ := f.ca.issue(t)
		pair := must(tls.X509KeyPair(c, k))
		f.client = &pair
	}
	f.vol = newVolume(t, files)
	authFile := ""
	if auth {
		authFile = filepath.Join(filepath.Dir(f.vol.dir), "authfile")
		if err := os.WriteFile(authFile, []byte("app:s3cret\nbatch:other\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var proc *os.Process
	f.addr, proc, f.mc = startMemcached(t, f.vol, authFile, mutual)
	f.pid = proc.Pid
	a := &Agent{Dir: f.vol.dir, AuthFile: authFile, Addr: f.addr, Mutual: mutual, Interval: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(f.logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	waitFor(t, 20*time.Second, "the agent watching", func() error {
		if !strings.Contains(f.logs.String(), "watching the TLS files") {
			return fmt.Errorf("agent log: %s", f.logs.String())
		}
		return nil
	})
	return f
}

func (f *agentFixture) files(certPEM, keyPEM []byte) map[string][]byte {
	files := map[string][]byte{CertFile: certPEM, KeyFile: keyPEM}
	if f.client != nil {
		files[ClientCAFile] = f.ca.pem
	}
	return files
}

// waitServed waits until a client trusting only the fixture's CA sees serial.
func (f *agentFixture) waitServed(t *testing.T, serial string) {
	t.Helper()
	waitFor(t, 20*time.Second, "serial "+serial+" served", func() error {
		got, err := servedSerial(f.addr, f.ca, f.client)
		if err != nil || got != serial {
			return fmt.Errorf("served %q (%v); agent log: %s", got, err, f.logs.String())
		}
		return nil
	})
}

// A renewal under the same CA is loaded into the running memcached: the
// process and its items stay, new clients see the new serial. With auth and
// mutual TLS, the agent authenticates with the mounted auth file and
// presents the server's certificate.
func TestAgentReloadsRenewalInPlace(t *testing.T) {
	for _, tc := range []struct {
		name         string
		auth, mutual bool
	}{{"tls", false, false}, {"tls+auth+mutual", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFixture(t, tc.auth, tc.mutual)
			f.waitServed(t, f.serial)
			if err := f.setItem("kept", "before-renewal", tc.auth); err != nil {
				t.Fatal(err)
			}
			certPEM, keyPEM, newSerial := f.ca.issue(t)
			f.vol.update(t, f.files(certPEM, keyPEM))
			f.waitServed(t, newSerial)
			if got, err := f.getItem("kept", tc.auth); err != nil || got != "before-renewal" {
				t.Fatalf("item after the renewal: %q, %v", got, err)
			}
			// The agent logs after its own check of the served serial.
			waitFor(t, 20*time.Second, "the reload logged", func() error {
				if !strings.Contains(f.logs.String(), `"msg":"reloaded the certificate in place"`) {
					return fmt.Errorf("agent log: %s", f.logs.String())
				}
				return nil
			})
			t.Logf("serial %s -> %s served by the same process (pid %d)", f.serial, newSerial, f.pid)
		})
	}
}

// Hostile Secret content: a key that does not match the certificate, and
// garbage, are refused before memcached sees them: memcached keeps serving
// the old certificate, does not crash, the agent logs why; a good renewal
// afterwards is still loaded.
func TestAgentRefusesMalformedFiles(t *testing.T) {
	f := startFixture(t, true, true)
	certPEM, _, _ := f.ca.issue(t)
	_, otherKey, _ := f.ca.issue(t)
	for i, bad := range []map[string][]byte{
		f.files(certPEM, otherKey),
		f.files([]byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), []byte("\x00\xff")),
		f.files(nil, nil),
	} {
		f.vol.update(t, bad)
		want := fmt.Sprintf(`"version":"..version_%d"`, i+2)
		waitFor(t, 20*time.Second, "the refusal logged", func() error {
			for _, l := range strings.Split(f.logs.String(), "\n") {
				if strings.Contains(l, want) && strings.Contains(l, "not reloading") && strings.Contains(l, "not a PEM certificate chain") {
					return nil
				}
			}
			return fmt.Errorf("agent log: %s", f.logs.String())
		})
		if got, err := servedSerial(f.addr, f.ca, f.client); err != nil || got != f.serial {
			t.Fatalf("after bad files %d memcached serves %q (%v), want the old serial %s; memcached: %s", i, got, err, f.serial, f.mc.String())
		}
	}
	certPEM, keyPEM, newSerial := f.ca.issue(t)
	f.vol.update(t, f.files(certPEM, keyPEM))
	f.waitServed(t, newSerial)
}

// A certificate of another issuer is a change of trust: the agent leaves it
// to the controller's rollout and memcached keeps serving the old one.
func TestAgentLeavesIssuerChangeToRollout(t *testing.T) {
	f := startFixture(t, false, false)
	other := newCA(t, "other-ca")
	certPEM, keyPEM, _ := other.issue(t)
	f.vol.update(t, f.files(certPEM, keyPEM))
	waitFor(t, 20*time.Second, "the decision logged", func() error {
		if !strings.Contains(f.logs.String(), "another issuer") {
			return fmt.Errorf("agent log: %s", f.logs.String())
		}
		return nil
	})
	if got, err := servedSerial(f.addr, f.ca, nil); err != nil || got != f.serial {
		t.Fatalf("memcached serves %q (%v), want the old serial %s", got, err, f.serial)
	}
}

func (f *agentFixture) conn(auth bool) (*tls.Conn, error) {
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // test client of a local server
	if f.client != nil {
		cfg.Certificates = []tls.Certificate{*f.client}
	}
	c, err := tls.Dial("tcp", f.addr, cfg)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if auth {
		if _, err := c.Write([]byte("set a 0 0 10\r\napp s3cret\r\n")); err != nil {
			return nil, err
		}
		buf := make([]byte, 8)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "STORED\r\n" {
			return nil, fmt.Errorf("auth: %q %v", buf[:n], err)
		}
	}
	return c, nil
}

func (f *agentFixture) setItem(key, value string, auth bool) error {
	c, err := f.conn(auth)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if _, err := fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\n", key, len(value), value); err != nil {
		return err
	}
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "STORED\r\n" {
		return fmt.Errorf("set: %q %v", buf[:n], err)
	}
	return nil
}

func (f *agentFixture) getItem(key string, auth bool) (string, error) {
	c, err := f.conn(auth)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	if _, err := fmt.Fprintf(c, "get %s\r\n", key); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 512)
	for !strings.HasSuffix(b.String(), "END\r\n") {
		n, err := c.Read(buf)
		if err != nil {
			return b.String(), err
		}
		b.Write(buf[:n])
	}
	lines := strings.Split(b.String(), "\r\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "VALUE ") {
		return "", fmt.Errorf("get: %q", b.String())
	}
	return lines[1], nil
}

// A new client CA is not reloaded either: memcached would add it to the CAs
// it trusts without dropping the old one; the rollout replaces the process.
func TestAgentLeavesClientCAChangeToRollout(t *testing.T) {
	f := startFixture(t, false, true)
	certPEM, keyPEM, _ := f.ca.issue(t)
	files := f.files(certPEM, keyPEM)
	files[ClientCAFile] = append(append([]byte{}, f.ca.pem...), newCA(t, "another client CA").pem...)
	f.vol.update(t, files)
	waitFor(t, 20*time.Second, "the decision logged", func() error {
		if !strings.Contains(f.logs.String(), "the client CA changed") {
			return fmt.Errorf("agent log: %s", f.logs.String())
		}
		return nil
	})
	if got, err := servedSerial(f.addr, f.ca, f.client); err != nil || got != f.serial {
		t.Fatalf("memcached serves %q (%v), want the old serial %s", got, err, f.serial)
	}
}
