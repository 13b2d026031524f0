package nsscaler

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxInternedLabelSets bounds the label sets a labelInterner holds; when
// full it starts over (the objects keep the maps they were given).
const maxInternedLabelSets = 4096

// labelInterner lets workloads with the same labels share one map in the
// cache. Workloads made from one template (every namespace of a fleet
// has its "app: web") carry the same few label sets thousands of times,
// and a small map costs ~300 bytes each; shared, a label set costs that
// once. The shared maps are never modified: the controller only reads
// cached objects, and controller-runtime copies an object (and its maps)
// before handing it to anyone who might change it.
type labelInterner struct {
	mu   sync.Mutex
	sets map[string]map[string]string
}

func newLabelInterner() *labelInterner {
	return &labelInterner{sets: map[string]map[string]string{}}
}

// intern replaces the object's labels by the shared map of the same set.
func (in *labelInterner) intern(m metav1.Object) {
	labels := m.GetLabels()
	if len(labels) == 0 {
		return
	}
	key := labelSetKey(labels)
	in.mu.Lock()
	defer in.mu.Unlock()
	if shared, ok := in.sets[key]; ok {
		m.SetLabels(shared)
		return
	}
	if len(in.sets) >= maxInternedLabelSets {
		clear(in.sets)
	}
	in.sets[key] = labels
}

// labelSetKey is a canonical rendering of a label set (keys sorted; a NUL
// cannot occur in a label key or value).
func labelSetKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}
