package memcached

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func deploymentOwning(fields string, mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mc", UID: "u1", Generation: 1, ResourceVersion: "10",
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", APIVersion: "apps/v1",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
				FieldsV1: metav1.NewFieldsV1(fields)},
		}}}
	for _, m := range mutate {
		m(d)
	}
	return d
}

// The memo trusts exactly the version of the controller's own fields on
// which the desired configuration was verified.
func TestAppliedMemo(t *testing.T) {
	const ours = `{"f:spec":{"f:replicas":{}}}`
	recorded := deploymentOwning(ours)
	tests := []struct {
		name    string
		live    *appsv1.Deployment
		desired uint64
		want    bool
	}{
		{name: "same version", live: recorded, desired: 1, want: true},
		{name: "status and resourceVersion changed", live: deploymentOwning(ours, func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.Status.ReadyReplicas = 2
			d.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(`{"f:status":{"f:readyReplicas":{}}}`)
		}), desired: 1, want: true},
		{name: "desired configuration changed", live: recorded, desired: 2},
		{name: "controller's fields changed (taken over by an update)", live: deploymentOwning(`{"f:spec":{}}`), desired: 1},
		{name: "generation changed", live: deploymentOwning(ours, func(d *appsv1.Deployment) { d.Generation = 2 }), desired: 1},
		{name: "recreated", live: deploymentOwning(ours, func(d *appsv1.Deployment) { d.UID = "u2" }), desired: 1},
		{name: "controller owns nothing", live: deploymentOwning(ours, func(d *appsv1.Deployment) { d.ManagedFields = d.ManagedFields[:1] }), desired: 1},
		{name: "the controller's entry is an update, not an apply", live: deploymentOwning(ours, func(d *appsv1.Deployment) {
			d.ManagedFields[1].Operation = metav1.ManagedFieldsOperationUpdate
		}), desired: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newAppliedMemo()
			m.record(recorded, 1)
			if got := m.holds(tt.live, tt.desired); got != tt.want {
				t.Fatalf("holds = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAppliedMemoForgetAndNil(t *testing.T) {
	m := newAppliedMemo()
	d := deploymentOwning(`{}`)
	m.record(d, 1)
	m.forget(types.NamespacedName{Namespace: "ns", Name: "other"})
	if !m.holds(d, 1) {
		t.Fatal("forgetting another Memcached dropped this one")
	}
	m.forget(types.NamespacedName{Namespace: "ns", Name: "mc"})
	if m.holds(d, 1) {
		t.Fatal("still held after forget")
	}
	var none *appliedMemo
	none.record(d, 1)
	none.forget(types.NamespacedName{})
	if none.holds(d, 1) {
		t.Fatal("a nil memo holds nothing")
	}
}

// The hash of a desired configuration is reused only for the same object
// and exactly the inputs it was built from.
func TestDesiredHashMemo(t *testing.T) {
	in := desiredInputs{uid: "u1", generation: 3, secretHash: "s1"}
	key := keyFor(&appsv1.Deployment{}, "ns", "mc")
	tests := []struct {
		name string
		key  appliedKey
		in   desiredInputs
		want bool
	}{
		{name: "same inputs", key: key, in: in, want: true},
		{name: "spec changed (generation)", key: key, in: desiredInputs{uid: "u1", generation: 4, secretHash: "s1"}},
		{name: "Secret data changed", key: key, in: desiredInputs{uid: "u1", generation: 3, secretHash: "s2"}},
		{name: "Memcached recreated", key: key, in: desiredInputs{uid: "u2", generation: 3, secretHash: "s1"}},
		{name: "another kind", key: keyFor(&appsv1.StatefulSet{}, "ns", "mc"), in: in},
		{name: "another Memcached", key: keyFor(&appsv1.Deployment{}, "ns", "other"), in: in},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newAppliedMemo()
			m.noteDesired(key, in, 42)
			hash, ok := m.desiredHash(tt.key, tt.in)
			if ok != tt.want || (ok && hash != 42) {
				t.Fatalf("desiredHash = %d, %v; want known %v", hash, ok, tt.want)
			}
		})
	}
	m := newAppliedMemo()
	m.noteDesired(key, in, 42)
	m.forget(types.NamespacedName{Namespace: "ns", Name: "mc"})
	if _, ok := m.desiredHash(key, in); ok {
		t.Fatal("still known after forget")
	}
	var none *appliedMemo
	none.noteDesired(key, in, 1)
	if _, ok := none.desiredHash(key, in); ok {
		t.Fatal("a nil memo knows nothing")
	}
}
