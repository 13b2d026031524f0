package rebootpolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// httpProber does an HTTP GET; a status in [200, 400) is a success, like
// the kubelet's httpGet probe. It sends the request and reads the answer
// itself, in the worker's goroutine, on a connection of its namespace's
// pool (http_pool.go), bounded by the connection's deadlines: a probe
// costs no goroutine, context or timer of its own.
type httpProber struct {
	pool    *httpPool
	release func()
	url     string
	// req is the first hop, built once; wire is it as sent, key where it
	// goes. Nothing writes to them after construction.
	req  *http.Request
	wire []byte
	key  connKey
	// answered, when set (tests), is called once a request has ended and
	// its connection is back in the pool or closed.
	answered func()

	mu sync.Mutex
	// inUse are the connections a request of this prober runs on (one
	// probe's, and the late answers it waits for): interrupt ends them.
	inUse map[*probeConn]struct{}
}

// newHTTPProber builds the request of a trigger validateTrigger accepted.
func newHTTPProber(pools *httpPools, namespace string, t autorebootv1alpha1.Trigger) (prober, error) {
	req, err := httpProbeRequest(t)
	if err != nil {
		return nil, err
	}
	key, wire, err := requestTarget(req)
	if err != nil {
		return nil, err
	}
	p := &httpProber{url: req.URL.String(), req: req, key: key, wire: wire, inUse: map[*probeConn]struct{}{}}
	p.pool, p.release = pools.acquire(namespace)
	return p, nil
}

// httpProbeRequest is the GET an httpGet trigger sends, without a context.
func httpProbeRequest(t autorebootv1alpha1.Trigger) (*http.Request, error) {
	g := t.Probe.HTTPGet
	host := g.Host
	if host == "" {
		host = t.ProbeHost
	}
	if host == "" {
		return nil, fmt.Errorf("httpGet probe has no host")
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(g.Port.IntValue()))}
	u, err := u.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("probe.httpGet.path: not a URL path")
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("probe.httpGet: not a valid request")
	}
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "runbook-rebootpolicy")
	}
	return req, nil
}

// requestTarget is where req goes and the bytes that ask for it.
func requestTarget(req *http.Request) (connKey, []byte, error) {
	var key connKey
	switch req.URL.Scheme {
	case "http":
	case "https":
		key.tls, key.serverName = true, req.URL.Hostname()
	default:
		return key, nil, fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if key.tls {
			port = "443"
		}
	}
	key.addr = net.JoinHostPort(req.URL.Hostname(), port)
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		return key, nil, fmt.Errorf("probe.httpGet: not a valid request")
	}
	return key, buf.Bytes(), nil
}

func (p *httpProber) kind() string { return typeHTTP }
func (p *httpProber) close()       { p.release() }

// maxAnswerGrace bounds answerGrace.
const maxAnswerGrace = 5 * time.Second

// answerGrace is how long the request of a probe that timed out may still
// wait for its answer after the probe's deadline (as long as the probe's
// timeout, at most maxAnswerGrace). The probe's result does not wait for
// it: it is "timed out" at the deadline. But HTTP/1.1 cannot abandon an
// answer half-read, so giving up at the deadline would close the
// connection, and every probe that timed out would cost the next one a
// dial: a network policy check and a handshake on both sides. With
// thousands of probes a second that fed itself once a busy moment made
// some of them late. With the answer awaited the connection goes back to
// the pool and the next probe reuses it.
func answerGrace(timeout time.Duration) time.Duration {
	return max(0, min(timeout, maxAnswerGrace))
}

// probe runs one probe until ctx's deadline (an hour without one). ctx
// reaching its deadline times the probe out but lets its request wait for
// a late answer, as probeWithin does; ctx cancelled interrupts it.
func (p *httpProber) probe(ctx context.Context) observation {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour)
	}
	// sctx ends only when ctx is cancelled while the probe runs; it is
	// not cancelled when the probe returns, because a late answer may
	// still be awaited on it (it holds nothing once unwatched).
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			stop()
		}
	})()
	defer context.AfterFunc(sctx, p.interrupt)()
	return p.probeUntil(sctx, deadline)
}

// probeWithin runs one probe for at most timeout; ctx is the worker's,
// whose end interrupts the prober (see interrupt).
func (p *httpProber) probeWithin(ctx context.Context, timeout time.Duration) observation {
	return p.probeUntil(ctx, time.Now().Add(timeout))
}

func (p *httpProber) probeUntil(ctx context.Context, deadline time.Time) observation {
	grace := deadline.Add(answerGrace(time.Until(deadline)))
	status, err := p.exchange(ctx, deadline, grace)
	if err != nil {
		return networkObservation(ctx, err, "GET "+p.url)
	}
	if status >= 200 && status < 400 {
		return observation{result: autorebootv1alpha1.ResultSuccess}
	}
	return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("GET %s: HTTP %d", p.url, status)}
}

// interrupt ends every request of the prober at once: its worker stops,
// and nothing will probe on those connections.
func (p *httpProber) interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.inUse {
		pc.setDeadline(time.Unix(1, 0))
	}
}

// exchange sends the probe's request and follows redirects, like
// net/http's client, each hop on a connection of the namespace's pool.
func (p *httpProber) exchange(ctx context.Context, deadline, grace time.Time) (int, error) {
	req, key, wire := p.req, p.key, p.wire
	for hop := 0; ; hop++ {
		status, location, err := p.roundTrip(ctx, req, key, wire, deadline, grace)
		if err != nil || !isRedirect(status) || location == "" {
			return status, err
		}
		if hop >= maxRedirects {
			return 0, errors.New("stopped after 10 redirects")
		}
		if req, err = redirectRequest(req, location); err != nil {
			return 0, err
		}
		if key, wire, err = requestTarget(req); err != nil {
			return 0, err
		}
	}
}

// roundTrip sends one request and reads its answer. A kept-alive
// connection the server closed while idle is found out by the request;
// it is sent again once on a new connection.
func (p *httpProber) roundTrip(ctx context.Context, req *http.Request, key connKey, wire []byte, deadline, grace time.Time) (int, string, error) {
	for attempt := 0; ; attempt++ {
		pc, err := p.pool.get(ctx, key, deadline)
		if err != nil {
			return 0, "", err
		}
		if err := p.track(ctx, pc, deadline); err != nil {
			p.finish(pc, false)
			return 0, "", err
		}
		if _, err := pc.conn.Write(wire); err != nil {
			p.finish(pc, false)
			if pc.reused && attempt == 0 && !isTimeout(err) && ctx.Err() == nil {
				continue
			}
			return 0, "", err
		}
		if err := pc.awaitAnswer(); err != nil {
			if errors.Is(err, errEarlyClose) && attempt == 0 {
				p.finish(pc, false)
				continue
			}
			if isTimeout(err) && ctx.Err() == nil {
				// The request is out and the answer may still come.
				go p.awaitLate(ctx, pc, req, grace)
				return 0, "", err
			}
			p.finish(pc, false)
			return 0, "", err
		}
		status, location, reusable, err := pc.readAnswer(req)
		p.finish(pc, err == nil && reusable)
		return status, location, err
	}
}

// awaitLate waits for the answer to a request whose probe timed out,
// until grace, so the connection can serve the next probe.
func (p *httpProber) awaitLate(ctx context.Context, pc *probeConn, req *http.Request, grace time.Time) {
	reusable := false
	if p.extend(ctx, pc, grace) && pc.awaitAnswer() == nil {
		_, _, reusable, _ = pc.readAnswer(req)
	}
	p.finish(pc, reusable)
}

// track records pc as in use by a request ending at deadline, unless the
// worker stopped (interrupt ran before pc was in use).
func (p *httpProber) track(ctx context.Context, pc *probeConn, deadline time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	p.inUse[pc] = struct{}{}
	pc.setDeadline(deadline)
	return nil
}

// extend moves the deadline of a tracked connection, unless the worker
// stopped meanwhile.
func (p *httpProber) extend(ctx context.Context, pc *probeConn, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	pc.setDeadline(t)
	return true
}

// finish ends pc's use by a request: back to the pool, or closed.
func (p *httpProber) finish(pc *probeConn, reusable bool) {
	p.mu.Lock()
	_, tracked := p.inUse[pc]
	delete(p.inUse, pc)
	p.mu.Unlock()
	if reusable {
		p.pool.put(pc)
	} else {
		p.pool.closeConn(pc)
	}
	if tracked && p.answered != nil {
		p.answered()
	}
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectRequest is the GET that follows prev's redirect to location,
// with what net/http's client carries over: the headers (credentials
// only to the same host or its subdomains), a custom Host only to a
// relative location, and the Referer.
func redirectRequest(prev *http.Request, location string) (*http.Request, error) {
	u, err := prev.URL.Parse(location)
	if err != nil {
		return nil, errors.New("invalid redirect location")
	}
	next, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errors.New("invalid redirect location")
	}
	sameHost := strings.EqualFold(u.Hostname(), prev.URL.Hostname()) || strings.HasSuffix(strings.ToLower(u.Hostname()), "."+strings.ToLower(prev.URL.Hostname()))
	for k, v := range prev.Header {
		if !sameHost && isCredentialHeader(k) {
			continue
		}
		next.Header[k] = v
	}
	if loc, err := url.Parse(location); err == nil && !loc.IsAbs() && prev.Host != prev.URL.Host {
		next.Host = prev.Host
	}
	if prev.URL.Scheme == "https" && u.Scheme == "http" {
		next.Header.Del("Referer")
	} else {
		ref := *prev.URL
		ref.User, ref.Fragment = nil, ""
		next.Header.Set("Referer", ref.String())
	}
	return next, nil
}

func isCredentialHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Authorization", "Www-Authenticate", "Cookie", "Cookie2":
		return true
	}
	return false
}

// probeAddress is host:port of a tcpSocket or grpc probe.
func probeAddress(host, fallback string, port int) (string, error) {
	if host == "" {
		host = fallback
	}
	if host == "" {
		return "", fmt.Errorf("probe has no host")
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}
