package metricsauth

import (
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

type cacheKey = [sha256.Size]byte

type cachedDecision struct {
	decision
	expires time.Time
}

// decisionCache keeps at most max decisions for ttl each. Every decision
// lives equally long, so the oldest inserted is the first to expire: when
// full, a new key replaces the oldest one (a ring of keys in insertion
// order), which bounds memory whatever tokens callers send.
type decisionCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	clock   clock.PassiveClock
	entries map[cacheKey]cachedDecision
	ring    []cacheKey // insertion order; ring[next] is the oldest once full
	next    int
}

func newDecisionCache(maxEntries int, ttl time.Duration, c clock.PassiveClock) *decisionCache {
	return &decisionCache{
		ttl:     ttl,
		clock:   c,
		entries: make(map[cacheKey]cachedDecision),
		ring:    make([]cacheKey, maxEntries),
	}
}

func (c *decisionCache) get(k cacheKey) (decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.clock.Now().Before(e.expires) {
		return decision{}, false
	}
	return e.decision, true
}

func (c *decisionCache) put(k cacheKey, d decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := cachedDecision{decision: d, expires: c.clock.Now().Add(c.ttl)}
	if _, ok := c.entries[k]; ok {
		// Renewed in place: it keeps its older slot, so it may be evicted
		// early, which costs one more review and nothing else.
		c.entries[k] = e
		return
	}
	if len(c.entries) == len(c.ring) {
		delete(c.entries, c.ring[c.next])
	}
	c.ring[c.next] = k
	c.next = (c.next + 1) % len(c.ring)
	c.entries[k] = e
}

// len is the number of decisions held (expired ones included until they
// are replaced).
func (c *decisionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
