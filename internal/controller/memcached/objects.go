package memcached

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Labels and annotations the controller writes.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"
	managedByValue = "runbook"
	nameValue      = "memcached"

	// AnnotationConfigHash on the pod template identifies the memcached
	// configuration the pods run; a new value rolls the pods.
	AnnotationConfigHash = "cache.runbook.dev/config-hash"

	containerMemcached = "memcached"
	containerExporter  = "exporter"
)

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

func ownerReference(mc *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// convertInto copies a typed API value into its apply configuration. Both
// share one JSON shape, so a JSON round trip is exact.
func convertInto[T any](in any, out *T) (*T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
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
