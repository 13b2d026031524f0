package probe

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The ConfigMap watch must not hold data: a kubectl
// last-applied-configuration annotation copies the whole object.
func TestTrimReferencedKeepsNoData(t *testing.T) {
	m := metadataObject(autorebootv1alpha1.WatchSecret)
	m.Namespace, m.Name, m.UID, m.ResourceVersion = "ns", "db", "u1", "42"
	m.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true", "team": "a"}
	m.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"pw":"aHVudGVyMg=="}}`}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	m.OwnerReferences = []metav1.OwnerReference{{Name: "x"}}
	out, err := trimReferenced(m)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if got.Name != "db" || got.Namespace != "ns" || got.ResourceVersion != "42" || got.UID != "u1" || got.Kind != "Secret" {
		t.Fatalf("identity lost: %+v", got)
	}
	if len(got.Annotations) != 0 || len(got.ManagedFields) != 0 || len(got.OwnerReferences) != 0 ||
		len(got.Labels) != 1 || got.Labels[autorebootv1alpha1.UsableLabel] != "true" {
		t.Fatalf("kept more than identity and the usable label: %+v", got)
	}
}
