package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReferencedTrigger fires for a target when a ConfigMap or Secret that the
// target's pod template references changes: env[].valueFrom (only that
// key), envFrom (every key), volumes and projected volumes (only the listed
// items when items is set), in init and regular containers. The set of
// references is read from each target's template, so nothing has to be
// kept in sync with it; a selector target tracks each workload's own
// references. The first observation of a reference (also one newly added
// to the template) only records its baseline.
type ReferencedTrigger struct {
	// Kinds limits the trigger to references of these kinds; empty means
	// both ConfigMaps and Secrets.
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Kinds []WatchKind `json:"kinds,omitempty"`
	// Exclude lists referenced objects that never fire (e.g. a ConfigMap
	// the application reloads by itself).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Exclude []ReferenceExclusion `json:"exclude,omitempty"`
	// PeriodSeconds between two reads of the referenced Secrets (unless the
	// manager watches Secrets) and between two re-checks of the references
	// (ConfigMap changes are watched and act at once).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=10
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// Objects, when set, replaces the targets' own references: exactly
	// these objects of the namespace are tracked, every key of each,
	// whether or not the pod template uses them; kinds and exclude are
	// then not used. The Reloader compatibility mode sets it from the
	// workload's annotations.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Objects []ReferencedObject `json:"objects,omitempty"`
}

// ReferencedObject names a ConfigMap or Secret of the namespace.
type ReferencedObject struct {
	// Kind of the object.
	Kind WatchKind `json:"kind"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReferenceExclusion names a referenced object that is not tracked.
type ReferenceExclusion struct {
	// Kind of the object; empty matches both kinds.
	// +optional
	Kind WatchKind `json:"kind,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReferencedTargetStatus is the baseline and pending state of one target of
// a referenced trigger.
type ReferencedTargetStatus struct {
	// Name of the target workload.
	Name string `json:"name"`
	// References identifies the set of referenced objects and keys the
	// fingerprint covers (a hash of their kinds, names and keys); a
	// template that references something else starts a new baseline.
	// +optional
	References string `json:"references,omitempty"`
	// Fingerprint is a keyed hash of the referenced data (see
	// PolicyStatus.Fingerprint).
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
	// PendingTrigger: referenced data changed; the restart of this target
	// has not been made yet.
	// +optional
	PendingTrigger bool `json:"pendingTrigger,omitempty"`
	// LastTriggerTime is when the pending change was first seen.
	// +optional
	LastTriggerTime *metav1.Time `json:"lastTriggerTime,omitempty"`
	// LastChangeTime is when the latest change merged into the pending
	// trigger was seen: the settle delay counts from it.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// LastChange names the ConfigMaps, Secrets and keys whose change made
	// this target's last fire (and those merged into its pending restart)
	// — names only, never values.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastChange string `json:"lastChange,omitempty"`
}
