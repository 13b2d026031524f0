package probe

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// rawServer answers each request it reads with what answer writes, on a
// bare TCP connection: it can say what no well-behaved server would.
type rawServer struct {
	l     net.Listener
	conns atomic.Int64
	// requests receives each request's path and headers.
	requests chan *http.Request
}

// answerFunc writes the answer to req on w; false closes the connection.
type answerFunc func(w io.Writer, req *http.Request) bool

func newRawServer(t *testing.T, answer answerFunc) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{l: l, requests: make(chan *http.Request, 64)}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			wg.Go(func() { s.serve(c, answer) })
		}
	})
	return s
}

func (s *rawServer) serve(c net.Conn, answer answerFunc) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		select {
		case s.requests <- req:
		default:
		}
		if !answer(c, req) {
			return
		}
	}
}

func (s *rawServer) addr() string { return s.l.Addr().String() }

// probeRaw runs one probe of path on s within timeout.
func probeRaw(t *testing.T, p Prober, timeout time.Duration) (Observation, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	o := p.Probe(ctx)
	return o, time.Since(start)
}

func rawProber(t *testing.T, s *rawServer, tr func(host string, port int) autorebootv1alpha1.Trigger) Prober {
	t.Helper()
	host, port := splitHostPort(t, s.addr())
	f := testProbers(t, nil, Settings{}, s.addr())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: tr(host, port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func plainTrigger(host string, port int) autorebootv1alpha1.Trigger {
	return httpTrigger(host, port, "/")
}

// A server may close a kept-alive connection while it is idle without
// saying so; the next probe finds out by trying, and sends its request
// again on a new connection instead of failing.
func TestHTTPProbeRetriesAConnectionClosedWhileIdle(t *testing.T) {
	s := newRawServer(t, func(w io.Writer, _ *http.Request) bool {
		_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return false // closes after answering, without "Connection: close"
	})
	p := rawProber(t, s, plainTrigger)
	for i := range 3 {
		if o, _ := probeRaw(t, p, 5*time.Second); o.Result != ok {
			t.Fatalf("probe %d: %+v", i, o)
		}
	}
	if got := s.conns.Load(); got != 3 {
		t.Errorf("%d connections for 3 probes on a server that closes each, want 3", got)
	}
}

// What a hostile or broken server answers decides the probe as the
// kubelet would, never holds the probe past its deadline, never makes the
// manager read more than its bounds, and never leaves a connection that
// is not at the start of the next answer in the pool.
func TestHTTPProbeHostileAnswers(t *testing.T) {
	const timeout = 500 * time.Millisecond
	endless := func(w io.Writer, chunk string) {
		for {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}
	for _, tc := range []struct {
		name   string
		answer string
		// then, when set, runs after answer is written (e.g. to stall).
		then   func(w io.Writer)
		result string
		// message is the suffix of a Failure's message.
		message string
		// reused: a second probe uses the same connection.
		reused bool
	}{
		{name: "plain 200 keeps its connection", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", result: ok, reused: true},
		{name: "204 without a body", answer: "HTTP/1.1 204 No Content\r\n\r\n", result: ok, reused: true},
		{name: "chunked body read to its end", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", result: ok, reused: true},
		{name: "informational answers first", answer: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", result: ok, reused: true},
		{name: "informational answers beyond the header bound", answer: strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 1000) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
			result: fail, message: ": request failed"},
		{name: "headers beyond 16 KiB", answer: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 20<<10) + "\r\nContent-Length: 0\r\n\r\n",
			result: fail, message: ": request failed"},
		{name: "not HTTP", answer: "SSH-2.0-OpenSSH_9.6\r\n\r\n", result: fail, message: ": request failed"},
		{name: "500 with a body", answer: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nsecret", result: fail, message: ": HTTP 500", reused: true},
		{name: "Connection: close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", result: ok},
		{name: "bytes after the answer", answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n", result: ok},
		{name: "body longer than what is drained", answer: "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("b", 20000), result: ok},
		{name: "endless chunked body", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
			then: func(w io.Writer) { endless(w, "1\r\nx\r\n") }, result: ok},
		{name: "body that stops coming", answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..",
			then: func(io.Writer) { time.Sleep(2 * timeout) }, result: fail, message: ": timed out"},
		{name: "headers that trickle in (slowloris)", answer: "HTTP/1.1 200 OK\r\n",
			then: func(w io.Writer) {
				for range 4 * timeout / (25 * time.Millisecond) {
					if _, err := io.WriteString(w, "X"); err != nil {
						return
					}
					time.Sleep(25 * time.Millisecond)
				}
			}, result: fail, message: ": timed out"},
		{name: "headers that stop coming", answer: "HTTP/1.1 200 OK\r\nX-A: 1\r\n",
			then: func(io.Writer) { time.Sleep(2 * timeout) }, result: fail, message: ": timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(w io.Writer, _ *http.Request) bool {
				if _, err := io.WriteString(w, tc.answer); err != nil {
					return false
				}
				if tc.then != nil {
					tc.then(w)
				}
				return true
			})
			p := rawProber(t, s, plainTrigger)
			o, took := probeRaw(t, p, timeout)
			if o.Result != tc.result || !strings.HasSuffix(o.Message, tc.message) {
				t.Fatalf("probe: %+v, want %s ending in %q", o, tc.result, tc.message)
			}
			if strings.Contains(o.Message, "secret") || strings.Contains(o.Message, "SSH") {
				t.Errorf("the message shows what the server said: %q", o.Message)
			}
			if took > timeout+200*time.Millisecond {
				t.Errorf("the probe took %s, beyond its %s timeout", took, timeout)
			}
			if tc.reused {
				if o, _ := probeRaw(t, p, timeout); o.Result != tc.result {
					t.Fatalf("second probe: %+v", o)
				}
				if got := s.conns.Load(); got != 1 {
					t.Errorf("%d connections for two probes, want 1 (kept alive)", got)
				}
			}
		})
	}
}

// Redirects are followed like net/http's client does, each hop through
// the network policy; a loop ends after maxRedirects.
func TestHTTPProbeRedirects(t *testing.T) {
	var hops atomic.Int64
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		switch r.URL.Path {
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
		case "/see-other":
			http.Redirect(w, r, "/down", http.StatusSeeOther)
		case "/no-location":
			w.WriteHeader(http.StatusFound)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String())
	probePath := func(path string, headers ...corev1.HTTPHeader) Observation {
		tr := httpTrigger(host, port, path)
		tr.Probe.HTTPGet.HTTPHeaders = headers
		return runProbe(t, f, tr)
	}
	if o := probePath("/moved", corev1.HTTPHeader{Name: "Host", Value: "app.local"}, corev1.HTTPHeader{Name: "Authorization", Value: "Bearer t"}); o.Result != ok {
		t.Errorf("301 to a healthy path: %+v", o)
	}
	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	if last.URL.Path != "/here" || last.Host != "app.local" || last.Header.Get("Authorization") != "Bearer t" || !strings.HasSuffix(last.Referer(), "/moved") {
		t.Errorf("the followed request: path %s host %s authorization %q referer %q", last.URL.Path, last.Host, last.Header.Get("Authorization"), last.Referer())
	}
	if o := probePath("/see-other"); o.Result != fail || !strings.HasSuffix(o.Message, ": HTTP 503") {
		t.Errorf("303 to a failing path: %+v", o)
	}
	if o := probePath("/no-location"); o.Result != ok {
		t.Errorf("302 without a location is the answer (a success, as in [200, 400)): %+v", o)
	}
	if o := probePath("/loop"); o.Result != fail || !strings.HasSuffix(o.Message, ": request failed") {
		t.Errorf("redirect loop: %+v", o)
	}
	if got := hops.Load(); got != maxRedirects+1 {
		t.Errorf("a loop was followed %d times, want %d", got, maxRedirects+1)
	}
}

// HTTPS probes keep their TLS connection alive too.
func TestHTTPSProbesReuseTheirConnection(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	tr := httpTrigger(host, port, "/")
	tr.Probe.HTTPGet.Scheme = corev1.URISchemeHTTPS
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String())
	p, err := f.NewProber(Spec{Policy: nsName("app", "rbp"), Name: "p", Trigger: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 3 {
		if o := p.Probe(context.Background()); o.Result != ok {
			t.Fatalf("probe %d: %+v", i, o)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d TLS connections for 3 probes, want 1", got)
	}
}

// Idle connections age out; the last prober of a namespace closes them.
func TestHTTPTransportClosesIdleConnections(t *testing.T) {
	var opened, closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	host, port := splitHostPort(t, srv.Listener.Addr().String())
	f := testProbers(t, nil, Settings{}, srv.Listener.Addr().String())
	newProber := func(ns string) Prober {
		p, err := f.NewProber(Spec{Policy: nsName(ns, "rbp"), Name: "p", Trigger: httpTrigger(host, port, "/")})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Aging out: a namespace whose connections time out after 50 ms.
	f.http.idleTimeout = 50 * time.Millisecond
	aging := newProber("aging")
	defer aging.Close()
	if o := aging.Probe(context.Background()); o.Result != ok {
		t.Fatalf("probe: %+v", o)
	}
	waitFor(t, "the idle connection to age out", func() bool { return closed.Load() == 1 })

	// The last prober of a namespace closes its idle connections at once.
	f.http.idleTimeout = time.Hour
	first, second := newProber("kept"), newProber("kept")
	for _, p := range []Prober{first, second} {
		if o := p.Probe(context.Background()); o.Result != ok {
			t.Fatalf("probe: %+v", o)
		}
	}
	if got := opened.Load(); got != 2 {
		t.Fatalf("%d connections, want 2 (one per namespace)", got)
	}
	first.Close()
	if got := closed.Load(); got != 1 {
		t.Errorf("%d connections closed while a prober of the namespace remains, want 1", got)
	}
	second.Close()
	waitFor(t, "the last prober to close the namespace's idle connection", func() bool { return closed.Load() == 2 })
}

// A body longer than what is drained closes its connection instead of
// being read to its end: the next probe dials anew.
func TestHTTPProbeHugeBodyClosesTheConnection(t *testing.T) {
	var written atomic.Int64
	s := newRawServer(t, func(w io.Writer, _ *http.Request) bool {
		if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n"); err != nil {
			return false
		}
		chunk := strings.Repeat("b", 32<<10)
		for written.Load() < 1<<30 {
			n, err := io.WriteString(w, chunk)
			written.Add(int64(n))
			if err != nil {
				return false
			}
		}
		return true
	})
	p := rawProber(t, s, plainTrigger)
	for i := range 2 {
		if o, _ := probeRaw(t, p, 5*time.Second); o.Result != ok {
			t.Fatalf("probe %d: %+v", i, o)
		}
	}
	if got := s.conns.Load(); got != 2 {
		t.Errorf("%d connections for two probes of a 1 GiB body, want 2 (each closed)", got)
	}
	if got := written.Load(); got >= 1<<30 {
		t.Errorf("the server could write %d bytes: the manager read the whole body", got)
	}
}

// At most maxDialsPerHost dials to an address run at once; the others
// wait for a slot (within their context), and other addresses do not.
func TestDialGateBoundsDialsInFlight(t *testing.T) {
	var inflight, most atomic.Int64
	gate := make(chan struct{})
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if addr == "other:80" {
			return nopConn{}, nil
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nopConn{}, nil
	}
	g := newDialGate(dial)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := g.DialContext(context.Background(), "tcp", "target:80"); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "two dials in flight", func() bool { return inflight.Load() == maxDialsPerHost })
	// Another address is not held by the first one's dials.
	octx, ocancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ocancel()
	if _, err := g.DialContext(octx, "tcp", "other:80"); err != nil {
		t.Fatalf("a dial to another address: %v", err)
	}
	// A dial whose context ends while it waits gives up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.DialContext(ctx, "tcp", "target:80"); err == nil {
		t.Error("a dial whose context ended got through the gate")
	}
	close(gate)
	wg.Wait()
	if m := most.Load(); m > maxDialsPerHost+1 {
		t.Errorf("%d dials at once (two to the target and one elsewhere), want at most %d", m, maxDialsPerHost+1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.addrs); n != 0 {
		t.Errorf("%d addresses left in an idle gate", n)
	}
}

// A dial that waits for a slot is dropped once its request has ended (it
// took a connection given back, or gave up): net/http would keep the
// connection idle though nothing waits for it. A dial whose request still
// waits is made.
func TestDialGateDropsTheDialOfAnEndedRequest(t *testing.T) {
	var dials atomic.Int64
	release := make(chan struct{})
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nopConn{}, nil
	}
	g := newDialGate(dial)
	var wg sync.WaitGroup
	for range maxDialsPerHost {
		wg.Go(func() {
			if _, err := g.DialContext(context.Background(), "tcp", "target:80"); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the slots taken", func() bool { return dials.Load() == maxDialsPerHost })

	// net/http dials with a context that keeps the request's values but
	// not its end.
	dialContext := func(req context.Context) context.Context {
		return context.WithoutCancel(&httpAttempt{Context: req})
	}
	ended, end := context.WithCancel(context.Background())
	endedErr := make(chan error, 1)
	go func() {
		_, err := g.DialContext(dialContext(ended), "tcp", "target:80")
		endedErr <- err
	}()
	waiting, stillWaiting := context.WithCancel(context.Background())
	defer stillWaiting()
	waitingErr := make(chan error, 1)
	go func() {
		_, err := g.DialContext(dialContext(waiting), "tcp", "target:80")
		waitingErr <- err
	}()
	waitFor(t, "two dials waiting for a slot", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.addrs["target:80"].users == maxDialsPerHost+2
	})
	end()
	if err := <-endedErr; !errors.Is(err, errDialNotNeeded) {
		t.Fatalf("the dial of an ended request: %v, want %v", err, errDialNotNeeded)
	}
	close(release)
	if err := <-waitingErr; err != nil {
		t.Fatalf("the dial of a request that still waits: %v", err)
	}
	wg.Wait()
	if got := dials.Load(); got != maxDialsPerHost+1 {
		t.Errorf("%d dials made, want %d (the ended request's dropped)", got, maxDialsPerHost+1)
	}
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// waitFor polls cond until it holds (probetest.WaitFor, which this
// package's own tests cannot import: probetest imports probe).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
