package memcached

import (
	"k8s.io/apimachinery/pkg/labels"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"
	managedByValue = "runbook"
	nameValue      = "memcached"
)

// objectLabelKeys are the controller's labels, which podLabels may not set.
var objectLabelKeys = map[string]struct{}{labelName: {}, labelInstance: {}, labelManagedBy: {}, labelComponent: {}}

// selectorLabels select the pods of one Memcached: unique per object within
// its namespace, so two caches never share pods, Service endpoints or a PDB.
func selectorLabels(mc *cachev1alpha1.Memcached) map[string]string {
	return map[string]string{
		labelName:      nameValue,
		labelInstance:  mc.Name,
		labelManagedBy: managedByValue,
	}
}

// objectLabels are put on every object the controller owns.
func objectLabels(mc *cachev1alpha1.Memcached) map[string]string {
	l := selectorLabels(mc)
	l[labelComponent] = "cache"
	return l
}

// selectorString is the status.selector of the scale subresource.
func selectorString(mc *cachev1alpha1.Memcached) string {
	return labels.SelectorFromSet(selectorLabels(mc)).String()
}
