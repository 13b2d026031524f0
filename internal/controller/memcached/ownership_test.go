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

func TestIsSubset(t *testing.T) {
	tests := []struct {
		name       string
		want, have any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", int64(1), int64(2), false},
		{"extra keys in have", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true},
		{"missing key", map[string]any{"a": "1", "c": "3"}, map[string]any{"a": "1"}, false},
		{"nested", map[string]any{"s": map[string]any{"l": []any{map[string]any{"p": "m"}}}},
			map[string]any{"s": map[string]any{"l": []any{map[string]any{"p": "m", "scheme": "http"}}}}, true},
		{"list length differs", []any{"a"}, []any{"a", "b"}, false},
		{"type differs", map[string]any{}, []any{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isSubset(tt.want, tt.have); got != tt.ok {
				t.Errorf("isSubset = %v, want %v", got, tt.ok)
			}
		})
	}
}
