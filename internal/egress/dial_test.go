package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// listen accepts and closes connections on 127.0.0.1 until the test ends.
func listen(t *testing.T, network, address string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

func policyAllowing(t *testing.T, rules string) *Policy {
	t.Helper()
	return New(Settings{Allow: mustRules(t, rules)}, newFakeCluster())
}

func dial(p *Policy, timeout time.Duration, network, address string) error {
	c, err := p.Dialer("team-a", timeout).DialContext(context.Background(), network, address)
	if err == nil {
		c.Close()
	}
	return err
}

// wantDenied checks a dial error as the tenant would see it.
func wantDenied(t *testing.T, err error, wantCategory string) {
	t.Helper()
	if got := category(t, err); got != wantCategory {
		t.Fatalf("dial: category %q, want %q (error %v)", got, wantCategory, err)
	}
	if !strings.Contains(err.Error(), deniedMessage) || strings.Contains(err.Error(), wantCategory) {
		t.Errorf("dial error %q: want the fixed phrase and no category", err)
	}
	if tenant := DialError(err); tenant.Error() != deniedMessage {
		t.Errorf("DialError = %q, want %q", tenant, deniedMessage)
	}
}

func TestDialerDeniesLoopbackByDefault(t *testing.T) {
	ln := listen(t, "tcp", "127.0.0.1:0")
	wantDenied(t, dial(New(Settings{}, newFakeCluster()), time.Second, "tcp", ln.Addr().String()), CategoryLoopback)
}

func TestDialerAllowsExactRule(t *testing.T) {
	ln := listen(t, "tcp", "127.0.0.1:0")
	other := listen(t, "tcp", "127.0.0.1:0")
	p := policyAllowing(t, ln.Addr().String())
	if err := dial(p, time.Second, "tcp", ln.Addr().String()); err != nil {
		t.Fatalf("dial allowed address: %v", err)
	}
	wantDenied(t, dial(p, time.Second, "tcp", other.Addr().String()), CategoryLoopback)
}

func TestDialerChecksResolvedAddress(t *testing.T) {
	ln := listen(t, "tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	wantDenied(t, dial(New(Settings{}, newFakeCluster()), time.Second, "tcp", "localhost:"+port), CategoryLoopback)
}

func TestDialerUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ok.sock")
	listen(t, "unix", path)
	wantDenied(t, dial(New(Settings{}, newFakeCluster()), time.Second, "unix", path), CategoryUnixSocket)
	p := New(Settings{AllowUnixSockets: []string{path}}, newFakeCluster())
	if err := dial(p, time.Second, "unix", path); err != nil {
		t.Fatalf("dial allowed socket: %v", err)
	}
}

// closedPort returns an address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDialFailuresLookAlike(t *testing.T) {
	closed := closedPort(t)
	open := listen(t, "tcp", "127.0.0.1:0").Addr().String()
	p := policyAllowing(t, closed+","+open+",192.0.2.1")
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		addr    string
	}{
		{"refused", time.Second, closed},
		{"timed out", time.Nanosecond, open},
		{"unroutable", 100 * time.Millisecond, "192.0.2.1:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dial(p, tc.timeout, "tcp", tc.addr)
			if err == nil {
				t.Skipf("dial %s succeeded on this network", tc.addr)
			}
			if _, denied := errors.AsType[*DeniedError](err); denied {
				t.Fatalf("dial %s denied: %v", tc.addr, err)
			}
			if got := DialError(err); got != ErrConnectionFailed || got.Error() != "connection failed" {
				t.Errorf("DialError(%v) = %v, want connection failed", err, got)
			}
		})
	}
}

func TestDialError(t *testing.T) {
	denied := &DeniedError{Category: CategoryMetadata}
	opErr := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	for _, tc := range []struct {
		name string
		in   error
		want error
	}{
		{"nil", nil, nil},
		{"denied", denied, denied},
		{"denied in dial error", opErr(denied), denied},
		{"denied in http error", &url.Error{Op: "Get", URL: "http://db.team-b/", Err: opErr(denied)}, denied},
		{"refused", opErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), ErrConnectionFailed},
		{"reset", opErr(os.NewSyscallError("read", syscall.ECONNRESET)), ErrConnectionFailed},
		{"unreachable", opErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), ErrConnectionFailed},
		{"timeout", opErr(os.ErrDeadlineExceeded), ErrConnectionFailed},
		{"context", context.DeadlineExceeded, ErrConnectionFailed},
		{"dns", opErr(&net.DNSError{Err: "no such host", Name: "db.team-b", IsNotFound: true}), ErrConnectionFailed},
	} {
		if got := DialError(tc.in); got != tc.want {
			t.Errorf("%s: DialError(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestRedirectRechecked follows a redirect from an allowed server to one that
// is not: the second hop dials anew and must be checked.
func TestRedirectRechecked(t *testing.T) {
	var hitsA, hitsB atomic.Int32
	srvB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hitsB.Add(1) }))
	defer srvB.Close()
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsA.Add(1)
		switch r.URL.Path {
		case "/to-b":
			http.Redirect(w, r, srvB.URL+"/secret", http.StatusFound)
		case "/to-self":
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	}))
	defer srvA.Close()
	p := policyAllowing(t, srvA.Listener.Addr().String())
	transport := &http.Transport{DialContext: p.Dialer("team-a", time.Second).DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}

	resp, err := client.Get(srvA.URL + "/to-self")
	if err != nil {
		t.Fatalf("redirect within the allowed server: %v", err)
	}
	resp.Body.Close()

	resp, err = client.Get(srvA.URL + "/to-b")
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect to a denied address was followed")
	}
	wantDenied(t, err, CategoryLoopback)
	if hitsB.Load() != 0 || hitsA.Load() != 3 {
		t.Errorf("hits A=%d B=%d, want A=3 B=0", hitsA.Load(), hitsB.Load())
	}
}
