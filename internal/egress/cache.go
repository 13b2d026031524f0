package egress

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache remembers lookups for ttl, at most limit of them.
type ttlCache[K comparable, V any] struct {
	ttl   time.Duration
	limit int

	mu      sync.Mutex
	entries map[K]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[K comparable, V any](ttl time.Duration, limit int) *ttlCache[K, V] {
	return &ttlCache[K, V]{ttl: ttl, limit: limit, entries: map[K]cacheEntry[V]{}}
}

// load returns the cached value of k, or fetches and caches it. Errors are
// not cached: a transient apiserver failure should deny dials only while it
// lasts. Concurrent misses may fetch twice, which is cheaper than making
// every dial wait on the slowest lookup.
func (c *ttlCache[K, V]) load(ctx context.Context, clk clock.PassiveClock, k K, fetch func(context.Context) (V, error)) (V, error) {
	if v, ok := c.get(clk.Now(), k); ok {
		return v, nil
	}
	v, err := fetch(ctx)
	if err != nil {
		return v, err
	}
	c.put(clk.Now(), k, v)
	return v, nil
}

func (c *ttlCache[K, V]) get(now time.Time, k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put drops every entry when a new key would exceed limit: keys come from
// tenants (every IP they probe), and one refill of lookups is a small price
// for a bound that needs no bookkeeping.
func (c *ttlCache[K, V]) put(now time.Time, k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.limit {
		c.entries = map[K]cacheEntry[V]{}
	}
	c.entries[k] = cacheEntry[V]{value: v, expires: now.Add(c.ttl)}
}

func (c *ttlCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
