package nsscaler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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
	// Strict: a field the CRD does not have is an error, not silently
	// dropped (a test left on a removed field fails).
	return k8s.Create(context.Background(), u, client.FieldValidation("Strict"))
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
		{"empty schedule", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"timeZone": "UTC"}}, "at least one window or exception"},
		{"time zone not a zone name", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"timeZone": "../../etc/passwd", "windows": []any{window("Mon", "01:00", "02:00")}}}, "timeZone"},
		{"bad days", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"windows": []any{window("Monday", "01:00", "02:00")}}}, "days"},
		{"bad time", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"windows": []any{window("Mon", "25:00", "02:00")}}}, "from"},
		{"empty window", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"windows": []any{window("Mon", "02:00", "02:00")}}}, "from and to must differ"},
		{"24:00 as a start", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"windows": []any{window("Mon", "24:00", "02:00")}}}, "from cannot be 24:00"},
		{"exception ends before it starts", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"exceptions": []any{
			map[string]any{"from": "2026-12-24T10:00:00Z", "until": "2026-12-24T09:00:00Z", "phase": "Asleep"}}}}, "until must be after from"},
		{"exception dates reversed", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"exceptions": []any{
			map[string]any{"from": "2026-12-26", "until": "2026-12-24", "phase": "Awake"}}}}, "until must not be before from"},
		{"exception phase", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"exceptions": []any{
			map[string]any{"from": "2026-12-24", "until": "2026-12-24", "phase": "Partial"}}}}, "phase"},
		{"exception not a time", map[string]any{"namespacePrefix": "p-", "schedule": map[string]any{"exceptions": []any{
			map[string]any{"from": "christmas", "until": "2026-12-24", "phase": "Asleep"}}}}, "from"},
		{"wake of a bad name", map[string]any{"namespacePrefix": "p-", "wake": []any{map[string]any{"namespace": "Not_A_Name", "until": "2026-12-24T10:00:00Z"}}}, "namespace"},
		{"duplicate wake", map[string]any{"namespacePrefix": "p-", "wake": []any{
			map[string]any{"namespace": "p-a", "until": "2026-12-24T10:00:00Z"}, map[string]any{"namespace": "p-a", "until": "2026-12-25T10:00:00Z"}}}, "Duplicate value"},
		{"empty exclude selector", map[string]any{"namespacePrefix": "p-", "excludeSelector": map[string]any{}}, "excludeSelector must not be empty"},
		{"bad mode", map[string]any{"namespacePrefix": "p-", "mode": "Maybe"}, "mode"},
		{"currency not a name", map[string]any{"namespacePrefix": "p-", "prices": map[string]any{"currency": "€\u001b[2J"}}, "currency"},
		{"no currency", map[string]any{"namespacePrefix": "p-", "prices": map[string]any{"cpuCoreHour": "1"}}, "currency"},
		{"negative price", map[string]any{"namespacePrefix": "p-", "prices": map[string]any{"currency": "EUR", "cpuCoreHour": "-0.04"}}, "must not be negative"},
		{"price not a quantity", map[string]any{"namespacePrefix": "p-", "prices": map[string]any{"currency": "EUR", "memoryGiBHour": "cheap"}}, "memoryGiBHour"},
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
		"schedule": map[string]any{
			"timeZone": "America/New_York",
			"windows":  []any{window("Mon-Fri", "20:00", "08:00"), window("Sat,Sun", "00:00", "24:00"), map[string]any{"from": "12:00:30", "to": "13:00"}},
			"exceptions": []any{
				map[string]any{"name": "christmas", "from": "2026-12-24", "until": "2026-12-26", "phase": "Asleep"},
				map[string]any{"from": "2026-12-01T18:00:00-05:00", "until": "2026-12-02T02:00:00Z", "phase": "Awake"},
			},
		},
		"wake":            []any{map[string]any{"namespace": "release-1", "until": "2026-12-24T10:00:00Z"}},
		"excludeSelector": map[string]any{"matchLabels": map[string]any{"keep": "running"}},
		"mode":            "DryRun",
		"prices":          map[string]any{"currency": "EUR", "cpuCoreHour": "0.04", "memoryGiBHour": 0},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: full}})
	})
	var f scalingv1alpha1.NSScaler
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: full}, &f)).To(Succeed())
	g.Expect(f.Spec.Schedule.TimeZone).To(Equal("America/New_York"))
	g.Expect(f.Spec.Schedule.Windows[2].Days).To(Equal("Mon-Sun"), "days left out default to every day")
	g.Expect(f.Spec.Prices.CPUCoreHour.String()).To(Equal("40m"))
}

func window(days, from, to string) map[string]any {
	return map[string]any{"days": days, "from": from, "to": to}
}

// TestSamplesAreAccepted: every NSScaler and WakeRequest sample in config/samples passes
// the CRD's validation (a server-side dry run: nothing is created).
func TestSamplesAreAccepted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "scaling_*.yaml"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("samples %v, %v: want the plain, schedule, wake and dry-run ones", paths, err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(p)
			g.Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal(raw, &u.Object)).To(Succeed())
			g.Expect(u.GetKind()).To(BeElementOf("NSScaler", "WakeRequest"))
			if u.GetKind() == "WakeRequest" {
				u.SetNamespace("default")
			}
			// Strict: a field the CRD no longer has is an error, not
			// silently dropped.
			g.Expect(k8s.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed())
		})
	}
}
