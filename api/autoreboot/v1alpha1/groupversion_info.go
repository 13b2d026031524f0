// Package v1alpha1 holds the RebootPolicy API of the autoreboot.runbook.dev group.
// +kubebuilder:object:generate=true
// +groupName=autoreboot.runbook.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the RebootPolicy API.
	GroupVersion = schema.GroupVersion{Group: "autoreboot.runbook.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the API types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
