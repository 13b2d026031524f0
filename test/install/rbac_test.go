package install

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// checkNoWildcards fails on a "*" anywhere in a rule: every verb, group,
// resource and URL the manager may use is named.
func checkNoWildcards(t *testing.T, what string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, p := range wildcardProblems(what, rules) {
		t.Error(p)
	}
}

func wildcardProblems(what string, rules []rbacv1.PolicyRule) []string {
	var out []string
	for i, r := range rules {
		for _, f := range []struct {
			field  string
			values []string
		}{{"verbs", r.Verbs}, {"apiGroups", r.APIGroups}, {"resources", r.Resources}, {"resourceNames", r.ResourceNames}, {"nonResourceURLs", r.NonResourceURLs}} {
			for _, v := range f.values {
				if strings.Contains(v, "*") {
					out = append(out, fmt.Sprintf("%s rule %d grants the wildcard %s %q: name each one (%+v)", what, i, f.field, v, r))
				}
			}
		}
	}
	return out
}

// allowedSecretVerbs: cluster-wide only get (one by one, uncached); in the
// manager's own namespace also create, for the fingerprint key Secret.
func allowedSecretVerbs(kind string) []string {
	if kind == "Role" {
		return []string{"create"}
	}
	return []string{"get"}
}

// secretVerbs collects the verbs granted on core Secrets.
func secretVerbs(rules []rbacv1.PolicyRule) []string {
	var verbs []string
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, "") {
			continue
		}
		if slices.Contains(r.Resources, "secrets") {
			verbs = append(verbs, r.Verbs...)
		}
	}
	slices.Sort(verbs)
	return slices.Compact(verbs)
}

// TestGeneratedClusterRoleIsLeastPrivilege guards the ClusterRole that
// controller-gen generates from the controllers' +kubebuilder:rbac markers.
func TestGeneratedClusterRoleIsLeastPrivilege(t *testing.T) {
	role := readClusterRole(t, repoPath("config", "rbac", "role.yaml"))
	if role.Name != "manager-role" {
		t.Errorf("generated ClusterRole is %q, want manager-role (bound by config/rbac/role_binding.yaml)", role.Name)
	}
	if len(role.Rules) == 0 {
		t.Fatal("the generated ClusterRole has no rules: the controllers' +kubebuilder:rbac markers are missing")
	}
	checkNoWildcards(t, "config/rbac/role.yaml", role.Rules)

	// Secrets are only read, one by one, in the namespace of the policy that
	// references them: a get per read (an uncached client), never a
	// cluster-wide list or watch that would cache every Secret in memory.
	if verbs := secretVerbs(role.Rules); len(verbs) > 0 && !slices.Equal(verbs, []string{"get"}) {
		t.Errorf("config/rbac/role.yaml grants %v on secrets; only get is allowed: read Secrets with the manager's APIReader "+
			"(uncached) and mark `+kubebuilder:rbac:groups=\"\",resources=secrets,verbs=get`", verbs)
	}

	// Nothing may escalate its own privileges or impersonate.
	for i, r := range role.Rules {
		for _, v := range r.Verbs {
			if v == "escalate" || v == "bind" || v == "impersonate" {
				t.Errorf("config/rbac/role.yaml rule %d grants %q", i, v)
			}
		}
		if slices.Contains(r.APIGroups, rbacv1.GroupName) {
			t.Errorf("config/rbac/role.yaml rule %d grants access to RBAC objects: %+v", i, r)
		}
	}
}

// TestHandWrittenRolesHaveNoWildcards covers every other Role and ClusterRole
// in config/rbac and the chart.
func TestHandWrittenRolesHaveNoWildcards(t *testing.T) {
	files, err := filepath.Glob(repoPath("config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeObjects(t, b) {
			if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
				checkNoWildcards(t, filepath.Base(f), convert[rbacv1.ClusterRole](t, o).Rules)
				checked++
			}
		}
	}
	objs := objectSet(decodeObjects(t, mustHelmTemplate(t, helmNamespace, allOptional...)))
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, o := range objs.ofKind(kind) {
			role := convert[rbacv1.ClusterRole](t, o)
			checkNoWildcards(t, "chart "+kind+" "+o.GetName(), role.Rules)
			if verbs := secretVerbs(role.Rules); len(verbs) > 0 && !slices.Equal(verbs, allowedSecretVerbs(kind)) {
				t.Errorf("chart %s %s grants %v on secrets", kind, o.GetName(), verbs)
			}
			checked++
		}
	}
	if checked < 8 {
		t.Errorf("checked only %d roles: the RBAC files moved?", checked)
	}
}
