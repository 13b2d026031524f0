package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WakeRequestSpec asks the NSScaler that parks the request's own namespace
// to let it run for a while. It cannot name another namespace: the request
// wakes the namespace it lives in, nothing else. The spec cannot be changed
// once created (the decision is made on it once); create another request.
// +kubebuilder:validation:XValidation:rule="has(self.duration) != has(self.until)",message="set exactly one of duration and until"
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a WakeRequest's spec cannot be changed; delete it and create another"
type WakeRequestSpec struct {
	// Duration is how long the namespace should run from the moment the
	// request is granted, a Go duration ("2h", "90m").
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="duration must be positive"
	Duration *metav1.Duration `json:"duration,omitempty"`

	// Until is when the namespace should be parked again (RFC 3339).
	// +optional
	// +kubebuilder:validation:Format=date-time
	Until *metav1.Time `json:"until,omitempty"`
}

// WakeRequestPhase is where a request stands.
type WakeRequestPhase string

const (
	// WakeRequestGranted: the namespace runs until status.grantedUntil.
	WakeRequestGranted WakeRequestPhase = "Granted"
	// WakeRequestRefused: the request was decided against; the Granted
	// condition's reason says why. A refusal is final.
	WakeRequestRefused WakeRequestPhase = "Refused"
	// WakeRequestEnded: the grant is over (it expired, or the NSScaler's
	// admin withdrew self-service); the namespace is parked again.
	WakeRequestEnded WakeRequestPhase = "Ended"
)

// ConditionGranted is the WakeRequest's condition: True while its wake is
// in force.
const ConditionGranted = "Granted"

// Reasons of a WakeRequest's Granted condition.
const (
	// ReasonWakeGranted: granted as asked.
	ReasonWakeGranted = "Granted"
	// ReasonWakeClipped: granted, but for at most the NSScaler's
	// selfService.maxDuration (the message says what was asked).
	ReasonWakeClipped = "Clipped"
	// ReasonNoScaler: no NSScaler parks (selects and owns) the namespace.
	ReasonNoScaler = "NoScaler"
	// ReasonSelfServiceDisabled: the NSScaler that owns the namespace does
	// not allow tenant wake-ups (spec.selfService.enabled is false).
	ReasonSelfServiceDisabled = "SelfServiceDisabled"
	// ReasonOverLimit: the namespace had selfService.maxPerDay grants in
	// the last 24 hours.
	ReasonOverLimit = "OverLimit"
	// ReasonAlreadyWoken: another request of the namespace holds a grant
	// in force; at most one does.
	ReasonAlreadyWoken = "AlreadyWoken"
	// ReasonProtected: the namespace is protected and never parked.
	ReasonProtected = "Protected"
	// ReasonInThePast: spec.until had passed when the request was decided.
	ReasonInThePast = "InThePast"
	// ReasonExpired: the grant ran out; the namespace is parked again.
	ReasonExpired = "Expired"
	// ReasonWithdrawn: the grant ended early because the NSScaler no
	// longer allows self-service or no longer owns the namespace.
	ReasonWithdrawn = "Withdrawn"
)

// Event reasons of a WakeRequest (regarding the request, related: the
// NSScaler) and of the NSScaler (related: the request).
const (
	// EventWakeGranted (Normal): a request was granted.
	EventWakeGranted = "WakeGranted"
	// EventWakeRefused (Warning): a request was refused; the note says why.
	EventWakeRefused = "WakeRefused"
	// EventWakeEnded (Normal): a grant ended (expired, withdrawn).
	EventWakeEnded = "WakeEnded"
)

// WakeRequestStatus is what the NSScaler decided.
type WakeRequestStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Granted, Refused or Ended; empty while undecided.
	// +optional
	Phase WakeRequestPhase `json:"phase,omitempty"`

	// Conditions: Granted.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// NSScaler is the NSScaler that decided (empty for NoScaler and
	// Protected).
	// +optional
	NSScaler string `json:"nsscaler,omitempty"`

	// GrantedAt is when the request was granted.
	// +optional
	GrantedAt *metav1.Time `json:"grantedAt,omitempty"`

	// GrantedUntil is when the namespace is parked again.
	// +optional
	GrantedUntil *metav1.Time `json:"grantedUntil,omitempty"`
}

// WakeRequest asks, from inside a namespace, that the NSScaler parking it
// let it run for a while, within the limits the NSScaler's admin set in
// spec.selfService.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wr
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].reason`
// +kubebuilder:printcolumn:name="Until",type=string,JSONPath=`.status.grantedUntil`
// +kubebuilder:printcolumn:name="NSScaler",type=string,JSONPath=`.status.nsscaler`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WakeRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WakeRequestSpec   `json:"spec"`
	Status WakeRequestStatus `json:"status,omitempty"`
}

// WakeRequestList is a list of WakeRequests.
// +kubebuilder:object:root=true
type WakeRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WakeRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WakeRequest{}, &WakeRequestList{})
}
