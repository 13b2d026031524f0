package memcached

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// ownerReference makes mc the controller of an owned object, so deleting
// mc garbage-collects it and metav1.IsControlledBy tells it from a foreign
// object of the same name.
func ownerReference(mc *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// describeForeign names a same-named object this Memcached does not control,
// for the Degraded condition. An object controlled by an earlier Memcached of
// the same name (deleted and recreated) is a leftover that the garbage
// collector removes; the controller takes over once it is gone.
func describeForeign(kind string, obj metav1.Object, mc *cachev1alpha1.Memcached) string {
	name := kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == "Memcached" && ref.Name == mc.Name &&
		ref.APIVersion == cachev1alpha1.GroupVersion.String() {
		return name + " (left over from a deleted Memcached of this name, awaiting garbage collection)"
	}
	return name
}
