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
//
// It also remembers, per owned object, the hash of the desired
// configuration last built for given inputs, so that a reconcile whose
// inputs did not change does not build and encode the desired object
// again only to find its hash.
type appliedMemo struct {
	mu      sync.Mutex
	seen    map[appliedKey]appliedVersion
	desired map[appliedKey]desiredVersion
}

// desiredInputs are what the desired owned objects are built from: the
// Memcached (its name and namespace are in the key, its spec is covered by
// its generation) and the fingerprint of its Secrets, the only input that
// is not in the spec.
type desiredInputs struct {
	uid        types.UID
	generation int64
	secretHash string
}

type desiredVersion struct {
	inputs desiredInputs
	hash   uint64
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
	return &appliedMemo{seen: map[appliedKey]appliedVersion{}, desired: map[appliedKey]desiredVersion{}}
}

// desiredHash is the hash of the configuration last built for key from
// in; false when none was.
func (m *appliedMemo) desiredHash(key appliedKey, in desiredInputs) (uint64, bool) {
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.desired[key]
	return v.hash, ok && v.inputs == in
}

// noteDesired records the hash of the configuration built for key from in.
func (m *appliedMemo) noteDesired(key appliedKey, in desiredInputs, hash uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desired[key] = desiredVersion{inputs: in, hash: hash}
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
	deleteOwnedBy(m.seen, key)
	deleteOwnedBy(m.desired, key)
}

// deleteOwnedBy drops the entries of the owned objects of the Memcached
// key (they share its namespace and name).
func deleteOwnedBy[V any](m map[appliedKey]V, key types.NamespacedName) {
	for k := range m {
		if k.namespace == key.Namespace && k.name == key.Name {
			delete(m, k)
		}
	}
}

func keyOf(o client.Object) appliedKey {
	return keyFor(o, o.GetNamespace(), o.GetName())
}

// keyFor is the key of the object of o's type named namespace/name.
func keyFor(o client.Object, namespace, name string) appliedKey {
	return appliedKey{kind: reflect.TypeOf(o).String(), namespace: namespace, name: name}
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
