package probe

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/runbook-dev/runbook/internal/egress"
)

// The HTTP clients of tenants' httpGet probes and webhooks: net/http with
// the egress guard as the dialer and bounds on what a server can make the
// manager read, hold or wait for.

const (
	// maxConnsPerHost bounds the connections one namespace's probes keep
	// to one target, busy, idle and being dialled alike; a probe past it
	// waits for one within its own timeout. Probes of a namespace share
	// them by keep-alive: thousands of probes at a one-second period need
	// a handful. It is above the default --probe-max-per-namespace (100),
	// so at the defaults no probe waits.
	maxConnsPerHost = 128
	// maxIdleConns bounds the idle connections of one namespace, all
	// targets together.
	maxIdleConns = 2 * maxConnsPerHost
	// idleConnTimeout closes a connection no probe used for this long.
	idleConnTimeout = 90 * time.Second
	// maxResponseHeaderBytes bounds the status line and headers of an
	// answer, informational answers included: a hostile server must not
	// make the manager buffer them.
	maxResponseHeaderBytes = 16 << 10
	// maxBodyDrain is how much of a probe's answer body is read (and
	// thrown away) so the connection can serve the next probe; a longer
	// body closes it.
	maxBodyDrain = 10 << 10
	// maxRedirects is how many redirects an httpGet probe follows, like
	// the kubelet.
	maxRedirects = 10
	// tlsHandshakeTimeout bounds a handshake whatever the caller's
	// deadline.
	tlsHandshakeTimeout = 10 * time.Second
	// dialTimeout bounds a probe's dial, its wait for a slot of the dial
	// gate included. net/http lets a dial outlive the request that
	// started it (the next request may use the connection), so the
	// probe's deadline does not end it; without a bound of its own a dial
	// to a filtered port would wait for the kernel to give up.
	dialTimeout = 30 * time.Second
)

// TenantTransport is the Transport of one namespace's requests.
//
// Every connection is dialled by dial, the egress guard of that namespace,
// which judges the address the socket connects to after DNS resolution:
// a redirect to a forbidden address, or a name that resolves to one now
// though it did not before, fails at connect time. A connection is only
// ever reused by requests of the namespace it was allowed for.
//
// Proxy is nil on purpose, whatever HTTP_PROXY and NO_PROXY say: through
// the manager's proxy a tenant would reach what the proxy reaches, and
// the guard would judge the proxy's address instead of the target's.
//
// HTTP/1.1 only, as before: one request per connection at a time, no
// HTTP/2 frames or streams for a hostile server to play with.
func TenantTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), tlsConfig *tls.Config) *http.Transport {
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxConnsPerHost,
		MaxConnsPerHost:        maxConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// No Accept-Encoding of our own: the body limit counts what
		// the server sent, not what it inflates to.
		DisableCompression: true,
		Protocols:          new(http.Protocols),
	}
	t.Protocols.SetHTTP1(true)
	return t
}

// probeTLSConfig is an httpGet probe's TLS, like the kubelet's: encrypted
// but unverified, since there is no CA to verify against. The server name
// is the URL's host (net/http sets it per connection).
func probeTLSConfig() *tls.Config {
	//nolint:gosec // like kubelet HTTPS probes: no CA to verify against
	return &tls.Config{InsecureSkipVerify: true}
}

// followRedirects is an httpGet probe's redirect policy: like the
// kubelet's, up to maxRedirects, each hop a new request through the same
// Transport, so a hop that opens a connection is judged by the egress
// guard on the address it connects to. net/http carries credentials only
// to the same host or its subdomains.
func followRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	return nil
}

// httpTransports keeps one probe client per namespace that has httpGet
// probes. A Transport shared by all namespaces would hand a connection
// opened (and allowed) for one namespace's probe to another's whose guard
// would refuse it; one per probe would hold thousands of idle connections
// to the same host.
type httpTransports struct {
	// dialer is the egress guard's dialer of a namespace (a field so that
	// tests can give it a resolver).
	dialer func(namespace string) *net.Dialer
	// idleTimeout is idleConnTimeout but in tests.
	idleTimeout time.Duration

	mu   sync.Mutex
	byNS map[string]*sharedClient
}

type sharedClient struct {
	client    *http.Client
	transport *http.Transport
	refs      int
}

func newHTTPTransports(network *egress.Policy) *httpTransports {
	return &httpTransports{
		dialer:      func(ns string) *net.Dialer { return network.Dialer(ns, 0) },
		idleTimeout: idleConnTimeout,
		byNS:        map[string]*sharedClient{},
	}
}

// acquire returns the probe client of namespace ns and the function that
// gives it back; the last give-back closes its idle connections.
func (c *httpTransports) acquire(ns string) (*http.Client, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.byNS[ns]
	if sc == nil {
		t := TenantTransport(newDialGate(c.dialer(ns).DialContext).DialContext, probeTLSConfig())
		t.IdleConnTimeout = c.idleTimeout
		sc = &sharedClient{transport: t, client: &http.Client{Transport: t, CheckRedirect: followRedirects}}
		c.byNS[ns] = sc
	}
	sc.refs++
	var once sync.Once
	return sc.client, func() { once.Do(func() { c.release(ns, sc) }) }
}

func (c *httpTransports) release(ns string, sc *sharedClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc.refs--
	if sc.refs > 0 {
		return
	}
	delete(c.byNS, ns)
	sc.transport.CloseIdleConnections()
}
