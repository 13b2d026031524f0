package rebootpolicy

import (
	"sync"

	"github.com/runbook-dev/runbook/internal/egress"
)

// maxRedirects is how many redirects an httpGet probe follows, like the
// kubelet; each hop that opens a connection is checked by the network
// policy again.
const maxRedirects = 10

// httpPools keeps one connection pool per namespace that has httpGet
// probes. A pool shared by all namespaces would hand a connection opened
// (and allowed) for one namespace's probe to another's whose policy would
// refuse it; one pool per probe would hold thousands of idle connections
// to the same host.
type httpPools struct {
	network *egress.Policy

	mu   sync.Mutex
	byNS map[string]*sharedPool
}

type sharedPool struct {
	pool *httpPool
	refs int
}

func newHTTPPools(network *egress.Policy) *httpPools {
	return &httpPools{network: network, byNS: map[string]*sharedPool{}}
}

// acquire returns the pool of namespace ns and the function that gives it
// back; the last give-back closes its idle connections.
func (c *httpPools) acquire(ns string) (*httpPool, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.byNS[ns]
	if sp == nil {
		// No proxy: the policy must judge the target, not a proxy.
		sp = &sharedPool{pool: newHTTPPool(c.network.Dialer(ns, 0).DialContext)}
		c.byNS[ns] = sp
	}
	sp.refs++
	var once sync.Once
	return sp.pool, func() { once.Do(func() { c.release(ns, sp) }) }
}

func (c *httpPools) release(ns string, sp *sharedPool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp.refs--
	if sp.refs > 0 {
		return
	}
	delete(c.byNS, ns)
	sp.pool.closeAll()
}
