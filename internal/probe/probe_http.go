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
	"sync/atomic"
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
// a late answer, as ProbeWithin does; ctx cancelled ends the request.
// Unlike ProbeWithin it returns at the deadline, leaving the late answer
// to a goroutine of its own.
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
	result := make(chan Observation, 1)
	go p.probeUntil(base, deadline, func(o Observation) { result <- o })
	return <-result
}

// ProbeWithin runs one probe for at most timeout and reports it once
// through report. ctx is the worker's, whose end ends the request at once,
// grace or not.
//
// A probe that times out is reported at its deadline, from a timer, while
// its request waits out the answer grace on the caller's goroutine:
// ProbeWithin returns only when the request has ended. So a worker has one
// request at a time and no goroutine besides its own: a worker whose
// target answers late does not send its next probe beside the late one,
// where it would need a second connection (a dial) while the first is
// still busy.
func (p *httpProber) ProbeWithin(ctx context.Context, timeout time.Duration, report func(Observation)) {
	p.probeUntil(ctx, time.Now().Add(timeout), report)
}

// probeUntil sends the request and reports its result, or a timeout at
// deadline if the request has not ended by then: exactly one of the two,
// and before probeUntil returns.
func (p *httpProber) probeUntil(ctx context.Context, deadline time.Time, report func(Observation)) {
	var claimed atomic.Bool
	lateDone := make(chan struct{})
	late := time.AfterFunc(time.Until(deadline), func() {
		defer close(lateDone)
		if claimed.CompareAndSwap(false, true) {
			report(networkObservation(ctx, context.DeadlineExceeded, "GET "+p.url))
		}
	})
	status, err := p.attempt(ctx, deadline)
	if late.Stop() {
		report(p.observation(ctx, status, err))
		return
	}
	// The deadline passed as the request ended: the first to claim the
	// probe reports it, and the timer's report must be over before the
	// worker goes on, so that reports keep their order.
	if claimed.CompareAndSwap(false, true) {
		report(p.observation(ctx, status, err))
	}
	<-lateDone
}

// observation is the result of a request that ended with status or err.
func (p *httpProber) observation(ctx context.Context, status int, err error) Observation {
	if err != nil {
		return networkObservation(ctx, err, "GET "+p.url)
	}
	if status >= 200 && status < 400 {
		return Observation{Result: autorebootv1alpha1.ResultSuccess}
	}
	return Observation{Result: autorebootv1alpha1.ResultFailure, Message: fmt.Sprintf("GET %s: HTTP %d", p.url, status)}
}

// httpAttempt is one probe's request context: the probe's deadline plus
// the answer grace. It is its own value under probeRequestKey, so that
// the dial gate drops a dial the request no longer needs, at no
// allocation of its own.
type httpAttempt struct {
	context.Context
}

func (a *httpAttempt) Value(key any) any {
	if key == (probeRequestKey{}) {
		return a.Context
	}
	return a.Context.Value(key)
}

// attempt sends the request and waits for its answer until deadline plus
// the answer grace.
func (p *httpProber) attempt(ctx context.Context, deadline time.Time) (int, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline.Add(answerGrace(time.Until(deadline))))
	defer cancel()
	status, err := p.get(&httpAttempt{Context: rctx})
	if p.answered != nil {
		p.answered()
	}
	return status, err
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
