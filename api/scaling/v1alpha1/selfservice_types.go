package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SelfService lets the teams of the namespaces an NSScaler parks wake their
// own namespace with a WakeRequest, within these limits.
type SelfService struct {
	// Enabled allows WakeRequests; without it every request is refused
	// (SelfServiceDisabled) and grants in force end.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// MaxDuration is the longest grant. A request for longer (a duration,
	// or an until further away) is granted for MaxDuration (reason
	// Clipped). A Go duration, at most 168h.
	// +optional
	// +kubebuilder:default="4h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('168h')",message="maxDuration must be positive and at most 168h"
	MaxDuration *metav1.Duration `json:"maxDuration,omitempty"`

	// MaxPerDay is how many requests of one namespace may be granted in
	// any 24 hours.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=48
	MaxPerDay int32 `json:"maxPerDay,omitempty"`
}

// TenantWake is a WakeRequest grant in force, in the NSScaler's status.
type TenantWake struct {
	// Namespace is the woken namespace.
	Namespace string `json:"namespace"`
	// Request is the WakeRequest's name (in Namespace).
	Request string `json:"request"`
	// Until is when the namespace is parked again.
	Until metav1.Time `json:"until"`
}

// SelfServiceGrants are the grants of one namespace in the last 24 hours:
// the memory maxPerDay is counted on, kept by the NSScaler so that deleting
// a request does not give its grant back.
type SelfServiceGrants struct {
	// Namespace is the namespace.
	Namespace string `json:"namespace"`
	// GrantedAt are the instants of its grants, oldest first.
	// +kubebuilder:validation:MaxItems=48
	GrantedAt []metav1.Time `json:"grantedAt"`
}
