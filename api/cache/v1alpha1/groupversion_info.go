// Package v1alpha1 contains the v1alpha1 API of the cache.runbook.dev group:
// the Memcached kind.
// +kubebuilder:object:generate=true
// +groupName=cache.runbook.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "cache.runbook.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Go types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
