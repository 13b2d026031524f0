// Package alerts asks the admin's Prometheus which alerts fire in a
// namespace, for the RebootPolicy alerts gate (spec.blockingAlerts). The
// Prometheus is the admin's (--prometheus-url), never a tenant's; its
// answers are still read as if hostile: bounded in size and time, parsed
// strictly, and reduced to alert names that the caller only compares with
// names it already holds.
package alerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults of Settings.
const (
	DefaultInterval         = 30 * time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultParallel         = 4
	// maxTokenBytes bounds the bearer-token file.
	maxTokenBytes = 64 << 10
	// maxErrorText bounds what of Prometheus's own error text is kept.
	maxErrorText = 256
)

// Settings are the admin's: where Prometheus is and how to reach it.
type Settings struct {
	// URL of the Prometheus HTTP API (its /api/v1 lies below it), http or
	// https, e.g. http://prometheus-k8s.monitoring.svc:9090.
	URL string
	// BearerTokenFile is read before every query (a projected token
	// rotates); empty: no Authorization header.
	BearerTokenFile string
	// CAFile holds the PEM CAs an https URL's certificate must chain to
	// (empty: the system's).
	CAFile string
	// Interval is how often the answer for a namespace is renewed while a
	// RebootPolicy there waits on it (DefaultInterval when 0).
	Interval time.Duration
	// Timeout bounds one query (DefaultTimeout, or Interval when shorter).
	Timeout time.Duration
	// MaxResponseBytes bounds one answer (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int64
	// Parallel is how many queries may run at once (DefaultParallel when 0).
	Parallel int
}

func (s Settings) withDefaults() Settings {
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.Timeout <= 0 {
		s.Timeout = min(DefaultTimeout, s.Interval)
	}
	if s.MaxResponseBytes <= 0 {
		s.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if s.Parallel <= 0 {
		s.Parallel = DefaultParallel
	}
	return s
}

// Client queries one Prometheus.
type Client struct {
	endpoint  *url.URL
	http      *http.Client
	tokenFile string
	timeout   time.Duration
	maxBytes  int64
}

// NewClient checks the settings and builds the client.
func NewClient(s Settings) (*Client, error) {
	s = s.withDefaults()
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q: want http(s)://host[:port][/path]", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--prometheus-url %q: no query or fragment", u.Redacted())
	}
	endpoint := u.JoinPath("api", "v1", "query")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--prometheus-ca-file %s: no PEM certificate", s.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if s.BearerTokenFile != "" {
		if _, err := readToken(s.BearerTokenFile); err != nil {
			return nil, fmt.Errorf("--prometheus-bearer-token-file: %w", err)
		}
	}
	return &Client{
		endpoint: endpoint,
		http: &http.Client{
			Transport: transport,
			// A redirect is not followed: it could lead anywhere, with the
			// token.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		tokenFile: s.BearerTokenFile,
		timeout:   s.Timeout,
		maxBytes:  s.MaxResponseBytes,
	}, nil
}

// Query is the PromQL asked for namespace ns: one series per alert name
// firing there, whatever the number of alerts, so that the answer stays
// small. Only the namespace goes into it, quoted as a PromQL string;
// the alert names of the RebootPolicies never do.
func Query(ns string) string {
	return `count by (alertname) (ALERTS{alertstate="firing",namespace=` + strconv.Quote(ns) + `})`
}

// Firing asks which alerts fire for namespace ns: their names, sorted and
// unique. The messages of its errors carry no address or token and stay
// the same while the cause does (they go into conditions).
func (c *Client) Firing(ctx context.Context, ns string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.endpoint
	u.RawQuery = url.Values{"query": {Query(ns)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, invalid("building the query: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.tokenFile != "" {
		token, err := readToken(c.tokenFile)
		if err != nil {
			return nil, unreachable("the bearer-token file cannot be read")
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err, c.timeout)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, transportError(ctx, err, c.timeout)
	}
	if int64(len(body)) > c.maxBytes {
		return nil, invalid("Prometheus's answer is larger than %d bytes", c.maxBytes)
	}
	return parseAnswer(resp.StatusCode, body)
}

func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxTokenBytes)
	}
	t := strings.TrimSpace(string(b))
	if t == "" || strings.ContainsAny(t, "\r\n") {
		return "", fmt.Errorf("%s holds no single-line token", path)
	}
	return t, nil
}
