package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceGrace counts the workloads of one parked namespace that are
// younger than spec.gracePeriod and so not parked yet.
type NamespaceGrace struct {
	// Namespace is the parked namespace.
	Namespace string `json:"namespace"`
	// Workloads counts its workloads in their grace period.
	Workloads int32 `json:"workloads"`
	// Until is when the last of them leaves its grace period and is
	// parked.
	Until metav1.Time `json:"until"`
}
