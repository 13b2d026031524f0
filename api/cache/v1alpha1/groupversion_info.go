// Package v1alpha1 contains the v1alpha1 API of the cache.runbook.dev group:
// the Memcached kind. It depends only on k8s.io/api and k8s.io/apimachinery,
// so clients can import it cheaply.
// +kubebuilder:object:generate=true
// +groupName=cache.runbook.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "cache.runbook.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Go types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
