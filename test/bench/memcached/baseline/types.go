package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// groupVersion is the baseline's own API group, so that its CRD and
// Runbook's cache.runbook.dev CRD can be installed in one cluster.
var groupVersion = schema.GroupVersion{Group: "tutorial.bench.runbook.dev", Version: "v1alpha1"}

// memcachedSpec is what the getting-started tutorial lets a user ask for:
// the number of instances.
type memcachedSpec struct {
	Size int32 `json:"size,omitempty"`
}

// memcachedStatus holds the tutorial's three conditions (Available,
// Progressing, Degraded).
type memcachedStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Memcached is the baseline's custom resource.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   memcachedSpec   `json:"spec,omitempty"`
	Status memcachedStatus `json:"status,omitempty"`
}

// MemcachedList is a list of Memcached, for the informer.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}

// The deep copies are written by hand: one small type does not justify a
// code generator in a benchmark's baseline.

func (in *Memcached) deepCopyInto(out *Memcached) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *Memcached) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(Memcached)
	in.deepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *MemcachedList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(MemcachedList)
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Memcached, len(in.Items))
		for i := range in.Items {
			in.Items[i].deepCopyInto(&out.Items[i])
		}
	}
	return out
}

func addToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(groupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(s, groupVersion)
	return nil
}
