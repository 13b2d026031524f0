package nsscaler

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func scaler(name string, created int, spec scalingv1alpha1.NSScalerSpec) scalingv1alpha1.NSScaler {
	return scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec:       spec,
	}
}

func nss(names ...string) []Namespace {
	out := make([]Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, Namespace{Name: n})
	}
	return out
}

func TestProtectedNamespaces(t *testing.T) {
	tests := []struct {
		operatorNS string
		want       []string
	}{
		{"", []string{"kube-node-lease", "kube-public", "kube-system"}},
		{"runbook-system", []string{"kube-node-lease", "kube-public", "kube-system", "runbook-system"}},
		{"kube-system", []string{"kube-node-lease", "kube-public", "kube-system"}},
	}
	for _, tt := range tests {
		t.Run(tt.operatorNS, func(t *testing.T) {
			if got := sets.List(ProtectedNamespaces(tt.operatorNS)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ProtectedNamespaces(%q) = %v, want %v", tt.operatorNS, got, tt.want)
			}
		})
	}
}

func TestPlanNamespaces(t *testing.T) {
	envTeam := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	labelled := []Namespace{
		{Name: "proj-a", Labels: map[string]string{"env": "dev"}},
		{Name: "proj-b", Labels: map[string]string{"env": "prod"}},
		{Name: "other", Labels: map[string]string{"env": "dev"}},
		{Name: "kube-system", Labels: map[string]string{"env": "dev"}},
	}
	tests := []struct {
		name       string
		self       scalingv1alpha1.NSScaler
		others     []scalingv1alpha1.NSScaler
		namespaces []Namespace
		parked     []string
		active     []string
		foreign    []string
		protected  []string
		conflicts  []scalingv1alpha1.NamespaceConflict
	}{
		{
			name:       "prefix with whitelist",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-", Whitelist: []string{"proj-b"}}),
			namespaces: nss("proj-a", "proj-b", "proj-c", "project", "default"),
			parked:     []string{"proj-a", "proj-c"}, active: []string{"proj-b"},
		},
		{
			name:       "whitelist entry outside the selection is ignored",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-", Whitelist: []string{"default"}}),
			namespaces: nss("proj-a", "default"),
			parked:     []string{"proj-a"},
		},
		{
			name:       "protected namespaces are never parked even when the prefix matches",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "kube-"}),
			namespaces: nss("kube-system", "kube-public", "kube-node-lease", "kube-apps", "runbook-system"),
			parked:     []string{"kube-apps"}, protected: []string{"kube-node-lease", "kube-public", "kube-system"},
		},
		{
			name:       "operator namespace is protected",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "runbook"}),
			namespaces: nss("runbook-system", "runbook-dev"),
			parked:     []string{"runbook-dev"}, protected: []string{"runbook-system"},
		},
		{
			name:       "selector only",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespaceSelector: envTeam}),
			namespaces: labelled,
			parked:     []string{"other", "proj-a"}, protected: []string{"kube-system"},
		},
		{
			name:       "prefix and selector must both match",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-", NamespaceSelector: envTeam}),
			namespaces: labelled,
			parked:     []string{"proj-a"},
		},
		{
			name:       "empty selector and no prefix selects nothing",
			self:       scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespaceSelector: &metav1.LabelSelector{}}),
			namespaces: labelled,
		},
		{
			name:       "older NSScaler owns a contested namespace",
			self:       scaler("new", 2, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"}),
			others:     []scalingv1alpha1.NSScaler{scaler("old", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-a"})},
			namespaces: nss("proj-a", "proj-b"),
			parked:     []string{"proj-b"}, foreign: []string{"proj-a"},
			conflicts: []scalingv1alpha1.NamespaceConflict{{Namespace: "proj-a", Owner: "old"}},
		},
		{
			name:       "the owner sees the conflict too",
			self:       scaler("old", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-a"}),
			others:     []scalingv1alpha1.NSScaler{scaler("new", 2, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"})},
			namespaces: nss("proj-a", "proj-b"),
			parked:     []string{"proj-a"},
			conflicts:  []scalingv1alpha1.NamespaceConflict{{Namespace: "proj-a", Owner: "old"}},
		},
		{
			name:       "same creation time: the name decides",
			self:       scaler("b", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"}),
			others:     []scalingv1alpha1.NSScaler{scaler("a", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"})},
			namespaces: nss("proj-a"),
			foreign:    []string{"proj-a"},
			conflicts:  []scalingv1alpha1.NamespaceConflict{{Namespace: "proj-a", Owner: "a"}},
		},
		{
			name:       "a whitelisted contested namespace is still owned by the older one",
			self:       scaler("old", 1, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-", Whitelist: []string{"proj-a"}}),
			others:     []scalingv1alpha1.NSScaler{scaler("new", 2, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "proj-"})},
			namespaces: nss("proj-a"),
			active:     []string{"proj-a"},
			conflicts:  []scalingv1alpha1.NamespaceConflict{{Namespace: "proj-a", Owner: "old"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := append([]scalingv1alpha1.NSScaler{tt.self}, tt.others...)
			plan, err := PlanNamespaces(&tt.self, all, tt.namespaces, mustProtection(t, "runbook-system"))
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got sets.Set[string], want []string) {
				t.Helper()
				if g := sets.List(got); (len(g) != 0 || len(want) != 0) && !reflect.DeepEqual(g, want) {
					t.Errorf("%s = %v, want %v", what, g, want)
				}
			}
			check("parked", plan.Parked, tt.parked)
			check("active", plan.Active, tt.active)
			check("foreign", plan.Foreign, tt.foreign)
			check("protected", plan.Protected, tt.protected)
			if (len(plan.Conflicts) != 0 || len(tt.conflicts) != 0) && !reflect.DeepEqual(plan.Conflicts, tt.conflicts) {
				t.Errorf("conflicts = %v, want %v", plan.Conflicts, tt.conflicts)
			}
		})
	}
}

func TestPlanNamespacesInvalidSelector(t *testing.T) {
	bad := scaler("s", 1, scalingv1alpha1.NSScalerSpec{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Sometimes"}},
	}})
	if _, err := PlanNamespaces(&bad, []scalingv1alpha1.NSScaler{bad}, nss("a"), mustProtection(t, "")); err == nil {
		t.Fatal("an invalid selector was accepted")
	}
	// Another NSScaler with an invalid selector selects nothing and contests nothing.
	good := scaler("good", 2, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "a"})
	plan, err := PlanNamespaces(&good, []scalingv1alpha1.NSScaler{bad, good}, nss("a"), mustProtection(t, ""))
	if err != nil || !plan.Parked.Has("a") || len(plan.Conflicts) != 0 {
		t.Fatalf("plan = %+v, err %v; want a parked without conflict", plan, err)
	}
}

func mustProtection(t *testing.T, operatorNamespace string, globs ...string) Protection {
	t.Helper()
	p, err := NewProtection(operatorNamespace, globs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProtection(t *testing.T) {
	p := mustProtection(t, "runbook-system", "team-infra-*", "db-[0-9]")
	for _, tc := range []struct {
		ns   Namespace
		want bool
	}{
		{Namespace{Name: "kube-system"}, true},
		{Namespace{Name: "runbook-system"}, true},
		{Namespace{Name: "team-infra-monitoring"}, true},
		{Namespace{Name: "db-7"}, true},
		{Namespace{Name: "db-77"}, false},
		{Namespace{Name: "proj-a", Labels: map[string]string{LabelProtected: "true"}}, true},
		{Namespace{Name: "proj-a", Labels: map[string]string{LabelProtected: "yes"}}, false},
		{Namespace{Name: "proj-a"}, false},
	} {
		if got := p.Protects(tc.ns); got != tc.want {
			t.Errorf("Protects(%+v) = %v, want %v", tc.ns, got, tc.want)
		}
	}
	if _, err := NewProtection("", []string{"team-["}); err == nil {
		t.Error("a malformed glob was accepted")
	}
}
