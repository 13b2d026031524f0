package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The request is built once per prober; what it carries is what the
// trigger says.
func TestHTTPProbeRequest(t *testing.T) {
	withHeaders := func(tr autorebootv1alpha1.Trigger, h ...corev1.HTTPHeader) autorebootv1alpha1.Trigger {
		tr.Probe.HTTPGet.HTTPHeaders = h
		return tr
	}
	https := httpTrigger("db.example", 8443, "ready")
	https.Probe.HTTPGet.Scheme = corev1.URISchemeHTTPS
	noHost := httpTrigger("", 80, "/")
	noHost.ProbeHost = "10.0.0.7"
	for _, tc := range []struct {
		name    string
		trigger autorebootv1alpha1.Trigger
		url     string
		// host is the Host header when it is not the URL's.
		host    string
		headers http.Header
		wantErr bool
	}{
		{name: "plain", trigger: httpTrigger("10.0.0.1", 8080, "/healthz"), url: "http://10.0.0.1:8080/healthz",
			headers: http.Header{"User-Agent": {"runbook-rebootpolicy"}}},
		{name: "path without a slash and https", trigger: https, url: "https://db.example:8443/ready",
			headers: http.Header{"User-Agent": {"runbook-rebootpolicy"}}},
		{name: "query kept", trigger: httpTrigger("10.0.0.1", 80, "/q?x=1"), url: "http://10.0.0.1:80/q?x=1",
			headers: http.Header{"User-Agent": {"runbook-rebootpolicy"}}},
		{name: "host from the target", trigger: noHost, url: "http://10.0.0.7:80/",
			headers: http.Header{"User-Agent": {"runbook-rebootpolicy"}}},
		{name: "headers, Host and User-Agent",
			trigger: withHeaders(httpTrigger("10.0.0.1", 80, "/"), corev1.HTTPHeader{Name: "Host", Value: "app.local"},
				corev1.HTTPHeader{Name: "X-A", Value: "1"}, corev1.HTTPHeader{Name: "X-A", Value: "2"}, corev1.HTTPHeader{Name: "User-Agent", Value: "me"}),
			url: "http://10.0.0.1:80/", host: "app.local", headers: http.Header{"X-A": {"1", "2"}, "User-Agent": {"me"}}},
		{name: "no host at all", trigger: httpTrigger("", 80, "/"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := httpProbeRequest(tc.trigger)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got a request for %s", req.URL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			host := tc.host
			if host == "" {
				host = req.URL.Host // what http.NewRequest sets, as before
			}
			if req.Method != http.MethodGet || req.URL.String() != tc.url || req.Host != host || req.Body != nil {
				t.Errorf("got %s %s host %q", req.Method, req.URL, req.Host)
			}
			if len(req.Header) != len(tc.headers) {
				t.Errorf("headers %v, want %v", req.Header, tc.headers)
			}
			for k, v := range tc.headers {
				if got := req.Header.Values(k); len(got) != len(v) || (len(v) > 0 && got[0] != v[0]) {
					t.Errorf("header %s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

// connCounter is a server that counts the connections it accepted and the
// requests with the headers a probe sends.
type connCounter struct {
	srv      *httptest.Server
	conns    atomic.Int64
	requests atomic.Int64
	// release, when set, holds requests until it is closed.
	release chan struct{}
	arrived chan struct{}
}

func newConnCounter(t *testing.T, hold bool) *connCounter {
	t.Helper()
	c := &connCounter{arrived: make(chan struct{}, 1024)}
	if hold {
		c.release = make(chan struct{})
	}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "yes" || r.Host != "app.local" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.requests.Add(1)
		c.arrived <- struct{}{}
		if c.release != nil {
			<-c.release
		}
		w.WriteHeader(http.StatusOK)
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *connCounter) trigger(t *testing.T) autorebootv1alpha1.Trigger {
	host, port := splitHostPort(t, c.srv.Listener.Addr().String())
	tr := httpTrigger(host, port, "/")
	tr.Probe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "app.local"}}
	return tr
}

// Probes of a namespace share kept-alive connections: consecutive probes
// (of one worker or of many) reuse one, and the shared request is sent
// unchanged every time.
func TestHTTPProbesReuseConnections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		probers  int
		rounds   int
		maxConns int64
	}{
		{name: "one Prober, many periods", probers: 1, rounds: 20, maxConns: 1},
		{name: "many Probers in turn", probers: 50, rounds: 2, maxConns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConnCounter(t, false)
			f := testProbers(t, nil, Settings{}, c.srv.Listener.Addr().String())
			var ps []Prober
			for i := range tc.probers {
				p, err := f.NewProber(Spec{Policy: nsName("app", "rbp-"+strconv.Itoa(i)), Name: "p", Trigger: c.trigger(t)})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				ps = append(ps, p)
			}
			for range tc.rounds {
				for _, p := range ps {
					if o := p.Probe(context.Background()); o.Result != ok {
						t.Fatalf("probe: %+v", o)
					}
				}
			}
			if got := c.requests.Load(); got != int64(tc.probers*tc.rounds) {
				t.Errorf("%d requests with the probe's headers, want %d", got, tc.probers*tc.rounds)
			}
			if got := c.conns.Load(); got > tc.maxConns {
				t.Errorf("%d connections, want at most %d", got, tc.maxConns)
			}
		})
	}
}

// However many probes of one namespace run at once, they open at most
// maxConnsPerHost connections to a host; the others wait for one (within
// their own timeout) and then succeed.
func TestHTTPProbesBoundConnectionsPerHost(t *testing.T) {
	c := newConnCounter(t, true)
	f := testProbers(t, nil, Settings{}, c.srv.Listener.Addr().String())
	n := maxConnsPerHost + 20
	var wg sync.WaitGroup
	results := make(chan Observation, n)
	for i := range n {
		p, err := f.NewProber(Spec{Policy: nsName("app", "rbp-"+strconv.Itoa(i)), Name: "p", Trigger: c.trigger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Go(func() { results <- p.Probe(context.Background()) })
	}
	// The first maxConnsPerHost requests arrive and are held; no more
	// connections open while they are.
	for range maxConnsPerHost {
		<-c.arrived
	}
	if got := c.conns.Load(); got != maxConnsPerHost {
		t.Errorf("%d connections with %d probes in flight, want %d", got, n, maxConnsPerHost)
	}
	close(c.release)
	wg.Wait()
	close(results)
	for o := range results {
		if o.Result != ok {
			t.Errorf("probe: %+v", o)
		}
	}
	if got := c.conns.Load(); got > maxConnsPerHost {
		t.Errorf("%d connections in all, want at most %d", got, maxConnsPerHost)
	}
}

// Another namespace's probes never get a connection opened for this one.
func TestHTTPProbesDoNotShareConnectionsAcrossNamespaces(t *testing.T) {
	c := newConnCounter(t, false)
	f := testProbers(t, nil, Settings{}, c.srv.Listener.Addr().String())
	for _, ns := range []string{"team-a", "team-b", "team-a", "team-b"} {
		p, err := f.NewProber(Spec{Policy: nsName(ns, "rbp"), Name: "p", Trigger: c.trigger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if o := p.Probe(context.Background()); o.Result != ok {
			t.Fatalf("probe: %+v", o)
		}
		// Kept open so the namespace's client (and its pool) stays.
		defer p.Close()
	}
	if got := c.conns.Load(); got != 2 {
		t.Errorf("%d connections for two namespaces probing twice each, want 2", got)
	}
}
