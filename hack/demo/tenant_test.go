package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/testenv"
)

// TestDemoInstallsTheWakeRequestRoles: the roles prepare applies are
// ClusterRoles that the aggregation controller folds into edit and admin
// (creating WakeRequests) and view (reading them), as the chart's.
func TestDemoInstallsTheWakeRequestRoles(t *testing.T) {
	aggregated := map[string][]string{} // built-in role → verbs on wakerequests it gets
	for _, f := range wakeRequestRoles {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", f))
		if err != nil {
			t.Fatal(err)
		}
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if r.Kind != "ClusterRole" {
			t.Errorf("%s is a %s, want a ClusterRole", f, r.Kind)
		}
		for _, builtin := range []string{"edit", "admin", "view"} {
			if r.Labels["rbac.authorization.k8s.io/aggregate-to-"+builtin] != "true" {
				continue
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "scaling.runbook.dev") && slices.Contains(rule.Resources, "wakerequests") {
					aggregated[builtin] = append(aggregated[builtin], rule.Verbs...)
				}
			}
		}
	}
	for builtin, want := range map[string][]string{"edit": {"create", "delete", "get"}, "admin": {"create", "delete", "get"}, "view": {"get", "list"}} {
		for _, verb := range want {
			if !slices.Contains(aggregated[builtin], verb) {
				t.Errorf("the built-in %s role gets %v on wakerequests from the demo's roles, want %s among them", builtin, aggregated[builtin], verb)
			}
		}
	}
}
