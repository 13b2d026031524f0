package probe

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// A redirect carries the probe's credentials only to the same host, and
// its custom Host only to a relative location.
func TestHTTPProbeRedirectCarriesCredentialsOnlyToTheSameHost(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]*http.Request{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r
		mu.Unlock()
		port := r.Context().Value(http.LocalAddrContextKey).(net.Addr).(*net.TCPAddr).Port
		switch r.URL.Path {
		case "/relative":
			http.Redirect(w, r, "/same", http.StatusFound)
		case "/other-host":
			// localhost is another host name for the same server.
			http.Redirect(w, r, "http://localhost:"+strconv.Itoa(port)+"/other", http.StatusFound)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String())
	for _, path := range []string{"/relative", "/other-host"} {
		tr := httpTrigger(host, port, path)
		tr.Probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{
			{Name: "Host", Value: "app.local"}, {Name: "Authorization", Value: "Bearer t"}, {Name: "Cookie", Value: "c=1"}, {Name: "X-Probe", Value: "yes"},
		}
		if o := runProbe(t, f, tr); o.Result != ok {
			t.Fatalf("%s: %+v", path, o)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	same, other := seen["/same"], seen["/other"]
	if same == nil || other == nil {
		t.Fatalf("redirects not followed: %v", seen)
	}
	if same.Header.Get("Authorization") != "Bearer t" || same.Header.Get("Cookie") != "c=1" || same.Host != "app.local" || same.Header.Get("X-Probe") != "yes" {
		t.Errorf("relative redirect: host %q headers %v", same.Host, same.Header)
	}
	if other.Header.Get("Authorization") != "" || other.Header.Get("Cookie") != "" || other.Header.Get("X-Probe") != "yes" {
		t.Errorf("redirect to another host: headers %v, want no credentials", other.Header)
	}
	if other.Host == "app.local" {
		t.Errorf("the custom Host was carried to an absolute location")
	}
}

// The guard judges the address a connection is made to, not what a name
// resolved to before: a name that resolved to the allowed server once and
// to a forbidden address now (DNS rebinding) reaches nothing there, and
// the server at the forbidden address sees no connection.
func TestHTTPProbeDNSRebindingIsJudgedAtConnectTime(t *testing.T) {
	allowed := newConnCounter(t, false)
	forbidden := newConnCounterOn(t, "127.0.0.2:0")
	_, allowedPort := splitHostPort(t, allowed.srv.Listener.Addr().String())
	_, forbiddenPort := splitHostPort(t, forbidden.srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, allowed.srv.Listener.Addr().String())

	// rebind.test answers 127.0.0.1 to its first lookup, 127.0.0.2 after.
	var lookups atomic.Int64
	resolver := fakeResolver(t, func(string) netip.Addr {
		if lookups.Add(1) == 1 {
			return netip.MustParseAddr("127.0.0.1")
		}
		return netip.MustParseAddr("127.0.0.2")
	})
	dialer := f.http.dialer
	f.http.dialer = func(ns string) *net.Dialer {
		d := dialer(ns)
		d.Resolver = resolver
		return d
	}
	probeAt := func(ns string, port int) Observation {
		tr := allowed.trigger(t)
		tr.Probe.HTTPGet.Host = "rebind.test"
		tr.Probe.HTTPGet.Port.IntVal = int32(port)
		p, err := f.NewProber(Spec{Policy: nsName(ns, "rbp"), Name: "p", Trigger: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return p.Probe(context.Background())
	}
	if o := probeAt("team-a", allowedPort); o.Result != ok {
		t.Fatalf("first lookup, the allowed server: %+v", o)
	}
	// Another namespace (no connection to reuse), the name now rebound.
	if o := probeAt("team-b", forbiddenPort); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonAddressNotAllowed {
		t.Fatalf("after rebinding: %+v, want Error/AddressNotAllowed", o)
	}
	if got := forbidden.conns.Load(); got != 0 {
		t.Errorf("the server at the rebound address saw %d connections", got)
	}
	if lookups.Load() < 2 {
		t.Errorf("%d lookups: the second probe did not resolve the name", lookups.Load())
	}
}

// The probes' Transports take no proxy from the
// environment: through the manager's proxy a tenant would reach what the
// proxy reaches, and the guard would judge the proxy's address.
func TestHTTPTransportsUseNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	f := testProbers(t, nil, Settings{})
	c, release := f.http.acquire("app")
	defer release()
	if tr := c.Transport.(*http.Transport); tr.Proxy != nil {
		t.Error("the probe transport has a Proxy")
	}
}

// newConnCounterOn is newConnCounter listening on addr.
func newConnCounterOn(t *testing.T, addr string) *connCounter {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &connCounter{arrived: make(chan struct{}, 16)}
	c.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})}}
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// fakeResolver answers A queries with answer(name) and others with no
// record, over an in-memory DNS-over-TCP connection.
func fakeResolver(t *testing.T, answer func(name string) netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(t, server, answer)
		return client, nil
	}}
}

func serveDNS(t *testing.T, c net.Conn, answer func(string) netip.Addr) {
	defer func() { _ = c.Close() }()
	for {
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		var msg dnsmessage.Message
		if err := msg.Unpack(query); err != nil || len(msg.Questions) != 1 {
			t.Errorf("DNS query: %v", err)
			return
		}
		q := msg.Questions[0]
		msg.Header.Response, msg.Header.Authoritative = true, true
		if q.Type == dnsmessage.TypeA {
			msg.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET},
				Body:   &dnsmessage.AResource{A: answer(q.Name.String()).As4()},
			}}
		}
		out, err := msg.Pack()
		if err != nil {
			t.Errorf("DNS answer: %v", err)
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err != nil {
			return
		}
	}
}
