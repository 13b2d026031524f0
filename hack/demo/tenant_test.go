package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestDemoInstallsTheWakeRequestRoles: the roles prepare applies are
// ClusterRoles that the aggregation controller folds into edit and admin
// (creating WakeRequests) and view (reading them), as the chart's.
func TestDemoInstallsTheWakeRequestRoles(t *testing.T) {
	aggregated := map[string][]string{} // built-in role → verbs on wakerequests it gets
	for _, f := range wakeRequestRoles {
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", f)), &r); err != nil {
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

// TestDemoTenantCanWake: what the printed instructions tell a user to try as
// the demo's tenant holds together. The tenant is bound to the built-in edit
// role in a namespace that the demo creates with a Deployment, that the
// NSScaler sample the demo applies parks (prefix, not whitelisted) with
// selfService enabled; the WakeRequest sample carries no namespace (it goes
// where -n says), asks for no more than maxDuration, and is deleted by the
// name the instructions use.
func TestDemoTenantCanWake(t *testing.T) {
	root := testenv.RepoRoot()
	var bound, deployment bool
	for _, doc := range yamlDocs(t, filepath.Join(root, "hack", "demo", "workloads.yaml")) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		switch {
		case obj.Kind == "Deployment" && obj.Metadata.Namespace == demoTenantNamespace:
			deployment = true
		case obj.Kind == "RoleBinding" && obj.Metadata.Namespace == demoTenantNamespace:
			var rb rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict(doc, &rb); err != nil {
				t.Fatal(err)
			}
			if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}) {
				continue
			}
			bound = bound || slices.Contains(rb.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: demoTenant})
		}
	}
	if !bound || !deployment {
		t.Errorf("hack/demo/workloads.yaml: %s bound to edit in %s: %v; a Deployment there: %v", demoTenant, demoTenantNamespace, bound, deployment)
	}

	samples := filepath.Join(root, "config", "samples")
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(samples, "kustomization.yaml")), &kustomization); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kustomization.Resources, "scaling_v1alpha1_nsscaler.yaml") {
		t.Fatal("config/samples/kustomization.yaml does not apply scaling_v1alpha1_nsscaler.yaml")
	}
	var scaler scalingv1alpha1.NSScaler
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(samples, "scaling_v1alpha1_nsscaler.yaml")), &scaler); err != nil {
		t.Fatal(err)
	}
	s := scaler.Spec
	if !strings.HasPrefix(demoTenantNamespace, s.NamespacePrefix) || s.NamespacePrefix == "" || slices.Contains(s.Whitelist, demoTenantNamespace) {
		t.Errorf("NSScaler %s (prefix %q, whitelist %v) does not park %s", scaler.Name, s.NamespacePrefix, s.Whitelist, demoTenantNamespace)
	}
	if s.SelfService == nil || !s.SelfService.Enabled || s.SelfService.MaxDuration == nil {
		t.Fatalf("NSScaler %s: selfService %+v, want enabled with a maxDuration", scaler.Name, s.SelfService)
	}

	sample := filepath.Join(samples, "scaling_v1alpha1_wakerequest.yaml")
	var wr scalingv1alpha1.WakeRequest
	if err := yaml.UnmarshalStrict(readFile(t, sample), &wr); err != nil {
		t.Fatal(err)
	}
	if wr.Namespace != "" || wr.Spec.Duration == nil || wr.Spec.Duration.Duration > s.SelfService.MaxDuration.Duration {
		t.Errorf("WakeRequest sample: namespace %q, duration %v; want none, and at most %s", wr.Namespace, wr.Spec.Duration, s.SelfService.MaxDuration.Duration)
	}

	var out bytes.Buffer
	d := &demo{options: options{stateDir: t.TempDir()}, root: root, out: &console{log: &out}, health: &healthServer{addrs: demoHealthAddrs}}
	d.printTryIt("/kubeconfig", false)
	for _, want := range []string{
		"kubectl --as " + demoTenant + " -n " + demoTenantNamespace + " create -f " + sample,
		"kubectl get wakerequest -n " + demoTenantNamespace,
		"kubectl --as " + demoTenant + " -n " + demoTenantNamespace + " delete wakerequest " + wr.Name,
		"kubectl runbook wake " + demoTenantNamespace + " --for 1h --as " + demoTenant,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the instructions lack %q:\n%s", want, out.String())
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs splits a multi-document YAML file.
func yamlDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(readFile(t, path))))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
}
