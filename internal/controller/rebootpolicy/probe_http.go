package rebootpolicy

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
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// httpProber does an HTTP GET; a status in [200, 400) is a success, like
// the kubelet's httpGet probe.
type httpProber struct {
	client  *http.Client
	release func()
	url     string
	// req is built once: a probe only gives it its context (a shallow
	// copy), instead of parsing the URL and cloning the headers every
	// period. Nothing writes to it or to its Header after construction
	// (the client forks a request before changing it), so the copies of
	// consecutive probes may share them.
	req *http.Request
	// answered, when set (tests), is called once a request has ended and
	// its connection is back in the pool or closed.
	answered func()
}

// newHTTPProber builds the request of a trigger validateTrigger accepted.
func newHTTPProber(clients *httpClients, namespace string, t autorebootv1alpha1.Trigger) (prober, error) {
	req, err := httpProbeRequest(t)
	if err != nil {
		return nil, err
	}
	p := &httpProber{url: req.URL.String(), req: req}
	p.client, p.release = clients.acquire(namespace)
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

func (p *httpProber) kind() string { return typeHTTP }
func (p *httpProber) close()       { p.release() }

// maxAnswerGrace bounds answerGrace.
const maxAnswerGrace = 5 * time.Second

// answerGrace is how long the request of a probe that timed out may still
// run after the probe's deadline (as long as the probe's timeout, at most
// maxAnswerGrace). The probe's result does not wait for it: it is
// "timed out" at the deadline, as before. But cancelling the request at
// the deadline closes its connection (HTTP/1.1 cannot abandon a response
// half-read), so every probe that timed out cost the next one a dial: a
// network policy check, a handshake, two goroutines and buffers on each
// side. With thousands of probes a second that fed itself once a busy
// moment made some of them late: 10,000 probes in process dialled 16,000
// connections in 10 s and most probes timed out; with the answer awaited
// the connection goes back to the pool and the next probe reuses it.
func answerGrace(timeout time.Duration) time.Duration {
	return max(0, min(timeout, maxAnswerGrace))
}

// httpAnswer is what a request got: a status, or an error.
type httpAnswer struct {
	status int
	err    error
}

func (p *httpProber) probe(ctx context.Context) observation {
	deadline, ok := ctx.Deadline()
	if !ok {
		return p.observe(ctx, p.get(ctx))
	}
	// The request keeps the context's values but not its cancellation;
	// it ends at its own deadline, the grace past the probe's.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(answerGrace(time.Until(deadline))))
	done := make(chan httpAnswer, 1)
	go func() {
		defer cancel()
		done <- p.get(rctx)
		if p.answered != nil {
			p.answered()
		}
	}()
	select {
	case a := <-done:
		return p.observe(ctx, a)
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The worker stops: nothing will probe on this connection.
			cancel()
		}
		return networkObservation(ctx, ctx.Err(), "GET "+p.url)
	}
}

// get sends the request and reads at most 10 KiB of the answer.
func (p *httpProber) get(ctx context.Context) httpAnswer {
	resp, err := p.client.Do(p.req.WithContext(ctx))
	if err != nil {
		return httpAnswer{err: err}
	}
	// Drain a little so the connection can be reused; never more, and
	// never keep or show what the server said.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	_ = resp.Body.Close()
	return httpAnswer{status: resp.StatusCode}
}

// observe turns an answer into the probe's observation; ctx is the
// probe's (a failure once it ended is a timeout).
func (p *httpProber) observe(ctx context.Context, a httpAnswer) observation {
	if a.err != nil {
		return networkObservation(ctx, a.err, "GET "+p.url)
	}
	if a.status >= 200 && a.status < 400 {
		return observation{result: autorebootv1alpha1.ResultSuccess}
	}
	return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("GET %s: HTTP %d", p.url, a.status)}
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
