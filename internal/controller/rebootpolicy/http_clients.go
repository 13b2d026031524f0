package rebootpolicy

import (
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/runbook-dev/runbook/internal/netpolicy"
)

// maxRedirects is how many redirects an httpGet probe follows, like the
// kubelet; each hop that opens a connection is checked by the network
// policy again.
const maxRedirects = 10

// maxConnsPerHost bounds the connections one namespace's probes keep to
// one host, busy and idle alike. Probes of a namespace share them by
// keep-alive: thousands of probes at a one-second period need a handful
// of connections, not one each. Idle ones are kept up to the same bound,
// so a burst above the usual concurrency does not close connections only
// to dial them again a second later (each dial is a network policy check,
// two goroutines and a TCP handshake on both sides). It is above the
// default --probe-max-per-namespace (100): at the defaults no probe ever
// waits for a connection; past it a probe waits within its own timeout.
const maxConnsPerHost = 128

// httpClients keeps one HTTP client per namespace that has httpGet
// probes. A connection pool shared by all namespaces would hand a
// connection opened (and allowed) for one namespace's probe to another's
// whose policy would refuse it; one pool per probe would hold thousands of
// idle connections to the same host.
type httpClients struct {
	network *netpolicy.Policy

	mu   sync.Mutex
	byNS map[string]*sharedClient
}

type sharedClient struct {
	client *http.Client
	refs   int
}

func newHTTPClients(network *netpolicy.Policy) *httpClients {
	return &httpClients{network: network, byNS: map[string]*sharedClient{}}
}

// acquire returns the client of namespace ns and the function that gives
// it back; the last give-back closes its idle connections.
func (c *httpClients) acquire(ns string) (*http.Client, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.byNS[ns]
	if sc == nil {
		sc = &sharedClient{client: c.newClient(ns)}
		c.byNS[ns] = sc
	}
	sc.refs++
	var once sync.Once
	return sc.client, func() { once.Do(func() { c.release(ns, sc) }) }
}

func (c *httpClients) release(ns string, sc *sharedClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc.refs--
	if sc.refs > 0 {
		return
	}
	delete(c.byNS, ns)
	sc.client.CloseIdleConnections()
}

func (c *httpClients) newClient(ns string) *http.Client {
	transport := &http.Transport{
		// No Proxy: the policy must judge the target, not a proxy.
		DialContext:         c.network.Dialer(ns, 0).DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // like kubelet HTTPS probes: no CA to verify against
		MaxIdleConns:        2 * maxConnsPerHost,
		MaxIdleConnsPerHost: maxConnsPerHost,
		MaxConnsPerHost:     maxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// A hostile server must not make the manager buffer its headers.
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}
