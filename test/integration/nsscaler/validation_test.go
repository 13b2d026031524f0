package nsscaler

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// createRaw creates an NSScaler from a spec given as plain JSON-like data, so
// that values the Go types would omit (empty strings) reach the apiserver.
func createRaw(name string, spec map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": scalingv1alpha1.GroupVersion.String(),
		"kind":       "NSScaler",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	return k8s.Create(context.Background(), u)
}

func TestValidationRejectsBadSpecs(t *testing.T) {
	tests := []struct {
		name    string
		spec    map[string]any
		message string
	}{
		{"empty prefix", map[string]any{"namespacePrefix": ""}, "namespacePrefix"},
		{"no selection at all", map[string]any{"whitelist": []any{"a"}}, "set namespacePrefix or namespaceSelector"},
		{"empty selector", map[string]any{"namespaceSelector": map[string]any{}}, "namespaceSelector must not be empty"},
		{"selector with empty matchLabels", map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{}}}, "namespaceSelector must not be empty"},
		{"prefix with upper case", map[string]any{"namespacePrefix": "Proj-"}, "namespacePrefix"},
		{"whitelist entry not a namespace name", map[string]any{"namespacePrefix": "p-", "whitelist": []any{"Not_A_Name"}}, "whitelist"},
		{"duplicate whitelist entries", map[string]any{"namespacePrefix": "p-", "whitelist": []any{"p-a", "p-a"}}, "Duplicate value"},
		{"unknown built-in kind", map[string]any{"namespacePrefix": "p-", "kinds": []any{map[string]any{"kind": "DaemonSet"}}}, "a kind without a group must be one of"},
		{"built-in group given", map[string]any{"namespacePrefix": "p-", "kinds": []any{map[string]any{"group": "apps", "kind": "Deployment"}}}, "built-in kinds are given without a group"},
		{"empty kinds", map[string]any{"namespacePrefix": "p-", "kinds": []any{}}, "kinds"},
		{"bad deletion policy", map[string]any{"namespacePrefix": "p-", "deletionPolicy": "Forget"}, "deletionPolicy"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			name := testenv.RandomName(fmt.Sprintf("invalid-%d", i))
			err := createRaw(name, tt.spec)
			if err == nil {
				_ = k8s.Delete(context.Background(), &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: name}})
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
}

func TestValidationAcceptsAndDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	defaults, full := testenv.RandomName("valid-defaults"), testenv.RandomName("valid-full")
	g.Expect(createRaw(defaults, map[string]any{"namespacePrefix": prefix("valid")})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: defaults}})
	})
	var s scalingv1alpha1.NSScaler
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: defaults}, &s)).To(Succeed())
	g.Expect(s.Spec.Kinds).To(Equal([]scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}, {Kind: "StatefulSet"}}))
	g.Expect(s.Spec.DeletionPolicy).To(Equal(scalingv1alpha1.DeletionPolicyRestore))

	g.Expect(createRaw(full, map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "dev"}},
		"whitelist":         []any{"release-1"},
		"kinds": []any{
			map[string]any{"kind": "Deployment"}, map[string]any{"kind": "CronJob"},
			map[string]any{"group": "cache.runbook.dev", "kind": "Memcached"},
		},
		"suspend":        true,
		"deletionPolicy": "Keep",
	})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: full}})
	})
}
