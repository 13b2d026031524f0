package nsscaler

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// maxInternedMaps bounds the maps a mapInterner holds; when full it starts
// over (the objects keep the maps they were given).
const maxInternedMaps = 4096

// mapInterner lets cached workloads with the same labels, or the same
// annotations of this controller, share one map. Workloads made from one
// template (every namespace of a fleet has its "app: web") carry the same
// few label sets thousands of times, and a parked fleet the same few
// recorded originals ({"replicas":1}); a small map costs a few hundred
// bytes, so a parked fleet held megabytes of identical annotation maps.
// The shared maps are never modified: the controller only reads
// cached objects, and controller-runtime copies an object (and its maps)
// before handing it to anyone who might change it.
type mapInterner struct {
	mu   sync.Mutex
	maps map[string]map[string]string
}

func newMapInterner() *mapInterner {
	return &mapInterner{maps: map[string]map[string]string{}}
}

// share returns the shared map with m's content (m itself the first time).
func (in *mapInterner) share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key := mapKey(m)
	in.mu.Lock()
	defer in.mu.Unlock()
	if shared, ok := in.maps[key]; ok {
		return shared
	}
	if len(in.maps) >= maxInternedMaps {
		clear(in.maps)
	}
	in.maps[key] = m
	return m
}

// mapKey is a canonical rendering of a map: keys sorted, each key and
// value prefixed by its length, so that no two maps render the same
// whatever bytes a tenant puts in an annotation value (two workloads of
// different tenants must never be handed one map).
func mapKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, s := range [2]string{k, m[k]} {
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
	}
	return b.String()
}
