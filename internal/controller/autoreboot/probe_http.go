package autoreboot

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
	url     string
	host    string
	headers http.Header
}

func newHTTPProber(f *probers, t autorebootv1alpha1.Trigger) (prober, error) {
	g := t.Probe.HTTPGet
	host := g.Host
	if host == "" {
		host = t.ProbeHost
	}
	if host == "" {
		return nil, fmt.Errorf("httpGet probe has no host")
	}
	if g.Port.Type != 0 {
		return nil, fmt.Errorf("httpGet port %q: named ports need a pod", g.Port.StrVal)
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(g.Port.IntValue()))}
	u, err := u.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("httpGet path %q: %w", g.Path, err)
	}
	p := &httpProber{client: f.http, url: u.String(), headers: http.Header{}}
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			p.host = h.Value
			continue
		}
		p.headers.Add(h.Name, h.Value)
	}
	if p.headers.Get("User-Agent") == "" {
		p.headers.Set("User-Agent", "runbook-rebootpolicy")
	}
	return p, nil
}

func (p *httpProber) kind() string { return typeHTTP }
func (p *httpProber) close()       {}

func (p *httpProber) probe(ctx context.Context) observation {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: err.Error()}
	}
	req.Header = p.headers.Clone()
	if p.host != "" {
		req.Host = p.host
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return dialObservation(err, "GET "+p.url)
	}
	// Drain a little so the connection can be reused.
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
