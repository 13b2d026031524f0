// Package v1alpha1 contains the API of the scaling.runbook.dev group: the
// cluster-scoped NSScaler, which parks the workloads of selected namespaces.
// +kubebuilder:object:generate=true
// +groupName=scaling.runbook.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the NSScaler API.
	GroupVersion = schema.GroupVersion{Group: "scaling.runbook.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
