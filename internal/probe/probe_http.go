package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// the kubelet's httpGet probe. It uses its namespace's client
// (http_transport.go), whose connections probes of the namespace share.
type httpProber struct {
	client  *http.Client
	release func()
	url     string
	// req is the request, built once; each probe sends a shallow copy
	// with its own context. Nothing writes to it after construction.
	req *http.Request
	// timerMu guards timer, the deadline timer of the probe in progress
	// (deadlineTimer).
	timerMu sync.Mutex
	timer   *time.Timer
	// answered, when set (tests), is called once a request has ended and
	// its connection is back in the pool or closed.
	answered func()
}

// newHTTPProber builds the request of a trigger validateTrigger accepted.
func newHTTPProber(transports *httpTransports, namespace string, t autorebootv1alpha1.Trigger) (Prober, error) {
	req, err := httpProbeRequest(t)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
	}
	p := &httpProber{url: req.URL.String(), req: req}
	p.client, p.release = transports.acquire(namespace)
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

func (p *httpProber) Kind() string { return TypeHTTP }
func (p *httpProber) Close()       { p.release() }

// maxAnswerGrace bounds answerGrace.
const maxAnswerGrace = 5 * time.Second

// answerGrace is how long the request of a probe that timed out may still
// wait for its answer after the probe's deadline (as long as the probe's
// timeout, at most maxAnswerGrace). The probe's result does not wait for
// it: it is "timed out" at the deadline. But HTTP/1.1 cannot abandon an
// answer half-read, so ending the request at the deadline would close the
// connection, and every probe that timed out would cost the next one a
// dial: an egress check and a handshake on both sides. With thousands of
// probes a second that fed itself once a busy moment made some of them
// late. With the answer awaited the connection goes back to the pool and
// the next probe reuses it.
func answerGrace(timeout time.Duration) time.Duration {
	return max(0, min(timeout, maxAnswerGrace))
}

var errTooManyRedirects = errors.New("stopped after 10 redirects")

// Probe runs one probe until ctx's deadline (an hour without one). ctx
// reaching its deadline times the probe out but lets its request wait for
// a late answer, as probeWithin does; ctx cancelled ends the request.
func (p *httpProber) Probe(ctx context.Context) Observation {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour)
	}
	// base ends only when ctx is cancelled before its deadline; it is not
	// cancelled when the probe returns, since a late answer may still be
	// awaited on it (it holds nothing once ctx no longer watches it).
	base, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			stop()
		}
	})()
	return p.probeUntil(base, deadline)
}

// ProbeWithin runs one probe for at most timeout; ctx is the worker's,
// whose end ends the request at once, grace or not.
func (p *httpProber) ProbeWithin(ctx context.Context, timeout time.Duration) Observation {
	return p.probeUntil(ctx, time.Now().Add(timeout))
}

// httpAnswer is what a request ended with.
type httpAnswer struct {
	status int
	err    error
}

// probeUntil sends the request from a goroutine of its own, so that the
// probe can report a timeout at deadline while the request waits out its
// grace.
func (p *httpProber) probeUntil(ctx context.Context, deadline time.Time) Observation {
	a := &httpAttempt{answer: make(chan httpAnswer, 1)}
	a.Context, a.cancel = context.WithDeadline(ctx, deadline.Add(answerGrace(time.Until(deadline))))
	go p.attempt(a)
	timer, own := p.deadlineTimer(time.Until(deadline))
	defer p.releaseTimer(timer, own)
	var r httpAnswer
	select {
	case r = <-a.answer:
	case <-timer.C:
		r.err = context.DeadlineExceeded
	}
	if r.err != nil {
		return networkObservation(ctx, r.err, "GET "+p.url)
	}
	if r.status >= 200 && r.status < 400 {
		return Observation{Result: autorebootv1alpha1.ResultSuccess}
	}
	return Observation{Result: autorebootv1alpha1.ResultFailure, Message: fmt.Sprintf("GET %s: HTTP %d", p.url, r.status)}
}

// httpAttempt is one probe's request. It is the request's context (the
// probe's deadline plus the answer grace) and makes that context the
// dial gate's probeRequestKey, so that a dial the request no longer needs
// is dropped, at no allocation of its own.
type httpAttempt struct {
	context.Context
	cancel context.CancelFunc
	answer chan httpAnswer
}

func (a *httpAttempt) Value(key any) any {
	if key == (probeRequestKey{}) {
		return a.Context
	}
	return a.Context.Value(key)
}

func (p *httpProber) attempt(a *httpAttempt) {
	defer a.cancel()
	status, err := p.get(a)
	a.answer <- httpAnswer{status: status, err: err}
	if p.answered != nil {
		p.answered()
	}
}

// deadlineTimer returns a timer that fires after d, and whether it is
// the prober's own, which releaseTimer gives back. A worker probes one at
// a time, so the prober keeps one timer for all its probes; a probe that
// finds it in use (two at once, as tests may run) gets one of its own.
func (p *httpProber) deadlineTimer(d time.Duration) (*time.Timer, bool) {
	if !p.timerMu.TryLock() {
		return time.NewTimer(d), false
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	return p.timer, true
}

func (p *httpProber) releaseTimer(t *time.Timer, own bool) {
	t.Stop()
	if own {
		p.timerMu.Unlock()
	}
}

// get sends the request, follows its redirects and reads the answer's
// body into nothing, at most maxBodyDrain bytes, only so that the
// connection can serve the next probe. A longer body, or one cut short,
// leaves the status as it is and the connection closed; a body that does
// not come before ctx ends is a failed probe, like the kubelet's.
func (p *httpProber) get(ctx context.Context) (int, error) {
	resp, err := p.client.Do(p.req.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyDrain+1))
	_ = resp.Body.Close()
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return resp.StatusCode, nil
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
