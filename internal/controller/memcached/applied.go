package memcached

import (
	"encoding/json"
	"hash/fnv"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedMemo remembers, per owned object, the version of the controller's
// fields on which the desired configuration was last found in place, so
// that the reconciles an owned object's status changes cause (a Deployment
// is updated several times on its way to available) do not extract the
// owned fields from managedFields and compare them again: that extraction
// is the most expensive step of a reconcile that writes nothing.
//
// A version is the object's UID and generation and the hash of the
// controller's own Apply entry in managedFields. The entry changes whenever
// a value the controller owns changes: another manager's apply with force
// takes the field over, and an update that changes or removes it takes it
// away from the controller. An unchanged entry therefore means unchanged
// owned values, whatever else (status, other managers' fields) changed.
// The memo is only a shortcut: when it does not know a version, the full
// comparison runs.
type appliedMemo struct {
	mu   sync.Mutex
	seen map[appliedKey]appliedVersion
}

type appliedKey struct {
	kind            string
	namespace, name string
}

type appliedVersion struct {
	uid        types.UID
	generation int64
	// fields hashes the controller's managedFields entry, desired the
	// JSON of the applied configuration.
	fields, desired uint64
}

func newAppliedMemo() *appliedMemo {
	return &appliedMemo{seen: map[appliedKey]appliedVersion{}}
}

// holds reports whether desired was found in place on this version of
// live's owned fields.
func (m *appliedMemo) holds(live client.Object, desired uint64) bool {
	if m == nil {
		return false
	}
	v, ok := versionOf(live, desired)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[keyOf(live)] == v
}

// record notes that live's owned fields hold desired.
func (m *appliedMemo) record(live client.Object, desired uint64) {
	if m == nil {
		return
	}
	v, ok := versionOf(live, desired)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[keyOf(live)] = v
}

// forget drops every owned object of the Memcached namespace/name.
func (m *appliedMemo) forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.seen {
		if k.namespace == key.Namespace && k.name == key.Name {
			delete(m.seen, k)
		}
	}
}

func keyOf(o client.Object) appliedKey {
	return appliedKey{kind: reflect.TypeOf(o).String(), namespace: o.GetNamespace(), name: o.GetName()}
}

// versionOf is live's version of the controller's fields; false when the
// controller owns no field of it (nothing to trust).
func versionOf(live client.Object, desired uint64) (appliedVersion, bool) {
	for _, e := range live.GetManagedFields() {
		if e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(e.APIVersion))
		_, _ = h.Write(e.FieldsV1.GetRawBytes())
		return appliedVersion{uid: live.GetUID(), generation: live.GetGeneration(), fields: h.Sum64(), desired: desired}, true
	}
	return appliedVersion{}, false
}

// desiredJSON is the configuration as the apiserver would receive it, and
// its hash.
func desiredJSON(desired any) ([]byte, uint64, error) {
	raw, err := json.Marshal(desired)
	if err != nil {
		return nil, 0, err
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return raw, h.Sum64(), nil
}
