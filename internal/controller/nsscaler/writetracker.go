package nsscaler

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// writeTracker remembers the state the controller itself wrote, per object,
// until the informer cache has caught up with it. A reconcile that runs while
// the cache is still behind its own writes then decides on what it wrote, not
// on the stale copy, and does not write the same change twice. The watch
// tells it when the cache caught up (observed): an update that is the
// controller's own write needs no reconcile — the one that wrote it counted
// it already — and the entry is dropped then, so that a mass park leaves no
// entries behind until the next reconcile.
type writeTracker struct {
	mu      sync.Mutex
	written map[types.UID]Workload
	// size, when set, shows len(written) (the awaiting-cache metric).
	size prometheus.Gauge
}

func newWriteTracker(size prometheus.Gauge) *writeTracker {
	return &writeTracker{written: map[types.UID]Workload{}, size: size}
}

func (t *writeTracker) record(w Workload) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written[w.UID] = w
	t.report()
}

// report updates the size gauge; the caller holds mu.
func (t *writeTracker) report() {
	if t.size != nil {
		t.size.Set(float64(len(t.written)))
	}
}

// freshest returns the newer of the cached copy and the last written state,
// forgetting the written state once the cache has reached it. known is
// false when no write is tracked (any more): the caller cannot tell then
// whether its copy predates a write the watch has delivered since.
func (t *writeTracker) freshest(cached Workload) (w Workload, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.written[cached.UID]
	if !ok {
		return cached, false
	}
	cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, w.ResourceVersion)
	if err == nil && cmp < 0 {
		return w, true
	}
	delete(t.written, cached.UID)
	t.report()
	return cached, true
}

// observed is told of each update of a workload the cache applied, with the
// object's new resourceVersion. Once the cache holds the written state or a
// newer one the entry is dropped; own is true when the update is exactly the
// controller's own write.
func (t *writeTracker) observed(uid types.UID, resourceVersion string) (own bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.written[uid]
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(resourceVersion, w.ResourceVersion)
	if err != nil || cmp >= 0 {
		delete(t.written, uid)
		t.report()
	}
	return err == nil && cmp == 0
}

// tracked returns the objects of kind k with a write not yet cached (nil
// when there are none).
func (t *writeTracker) tracked(k KindKey) map[types.UID]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[types.UID]struct{}
	for uid, w := range t.written {
		if w.Kind != k {
			continue
		}
		if out == nil {
			out = map[types.UID]struct{}{}
		}
		out[uid] = struct{}{}
	}
	return out
}

// forget drops the entries of objects that are gone.
func (t *writeTracker) forget(gone map[types.UID]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range gone {
		delete(t.written, uid)
	}
	t.report()
}
