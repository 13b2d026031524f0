package memcached

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func TestDescribeForeign(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "new"}}
	ref := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "cache.runbook.dev/v1alpha1", Kind: kind, Name: name, UID: "old", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name     string
		owners   []metav1.OwnerReference
		leftover bool
	}{
		{"no owner", nil, false},
		{"another kind", ref("Other", "c"), false},
		{"another Memcached's name", ref("Memcached", "d"), false},
		{"earlier Memcached of this name", ref("Memcached", "c"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", OwnerReferences: tt.owners}}
			got := describeForeign("Deployment", d, mc)
			if !strings.HasPrefix(got, "Deployment ns/c") {
				t.Errorf("got %q", got)
			}
			if strings.Contains(got, "left over") != tt.leftover {
				t.Errorf("got %q, leftover = %v", got, tt.leftover)
			}
		})
	}
}
