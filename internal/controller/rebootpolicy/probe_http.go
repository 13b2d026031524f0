package rebootpolicy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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

func (p *httpProber) probe(ctx context.Context) observation {
	resp, err := p.client.Do(p.req.WithContext(ctx))
	if err != nil {
		return networkObservation(ctx, err, "GET "+p.url)
	}
	// Drain a little so the connection can be reused; never more, and
	// never keep or show what the server said.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return observation{result: autorebootv1alpha1.ResultSuccess}
	}
	return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("GET %s: HTTP %d", p.url, resp.StatusCode)}
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
