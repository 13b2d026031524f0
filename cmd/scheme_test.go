package main

import (
	"bufio"
	"flag"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/registry"
)

// managerScheme is the scheme exactly as main builds it.
func managerScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	registerControllers(&registry.Registry{}, scheme, flag.NewFlagSet("test", flag.ContinueOnError))
	return scheme
}

// TestSchemeKnowsControllerObjects: every typed object a controller gets,
// lists, watches, writes, owns or reports an event about (and the Lease of
// the leader election's events) is known to the manager's scheme.
func TestSchemeKnowsControllerObjects(t *testing.T) {
	scheme := managerScheme(t)
	objs := []client.Object{
		&autorebootv1alpha1.RebootPolicy{}, &cachev1alpha1.Memcached{}, &scalingv1alpha1.NSScaler{},
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &batchv1.CronJob{},
		&corev1.Namespace{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}, &corev1.Pod{},
		&discoveryv1.EndpointSlice{}, &networkingv1.NetworkPolicy{}, &networkingv1.ServiceCIDR{},
		&policyv1.PodDisruptionBudget{}, &coordinationv1.Lease{},
	}
	lists := []client.ObjectList{
		&autorebootv1alpha1.RebootPolicyList{}, &cachev1alpha1.MemcachedList{}, &scalingv1alpha1.NSScalerList{},
		&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}, &batchv1.CronJobList{},
		&corev1.NamespaceList{}, &discoveryv1.EndpointSliceList{},
	}
	for _, o := range objs {
		if _, _, err := scheme.ObjectKinds(o); err != nil {
			t.Errorf("%T: %v", o, err)
		}
	}
	for _, l := range lists {
		if _, _, err := scheme.ObjectKinds(l); err != nil {
			t.Errorf("%T: %v", l, err)
		}
	}
}

// TestSchemeCoversControllers: the built-in API groups registered are
// exactly the k8s.io/api packages the manager's own code imports (plus
// coordination.k8s.io for the leader election), so a controller that
// starts to use a new group fails here rather than at run time with "no
// kind is registered", and a group no longer used is not kept registered.
func TestSchemeCoversControllers(t *testing.T) {
	want := importedKubernetesAPIs(t)
	want["k8s.io/api/coordination/v1"] = true // leader election: events about its Lease
	got := map[string]bool{}
	for _, typ := range managerScheme(t).AllKnownTypes() {
		if p := typ.PkgPath(); strings.HasPrefix(p, "k8s.io/api/") {
			got[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if !got[p] {
			t.Errorf("the manager imports %s but its scheme lacks the group: add it to kubernetesAPIs", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if !want[p] {
			t.Errorf("the scheme registers %s, which no manager package imports: remove it from kubernetesAPIs", p)
		}
	}
}

// typedClientOnly are the module's packages that send their k8s.io/api
// objects through client-go's typed clients (which bring their own scheme),
// never through the manager's client, cache or event recorders.
var typedClientOnly = map[string]bool{
	"internal/metricsauth": true, // TokenReviews and SubjectAccessReviews
}

// importedKubernetesAPIs walks the import graph of this package through
// the module's own packages (non-test files, but typedClientOnly) and
// returns the k8s.io/api packages reached.
func importedKubernetesAPIs(t *testing.T) map[string]bool {
	t.Helper()
	root, module := moduleRoot(t)
	found := map[string]bool{}
	seen := maps.Clone(typedClientOnly)
	queue := []string{"cmd"}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for _, imp := range packageImports(t, filepath.Join(root, dir)) {
			switch {
			case strings.HasPrefix(imp, "k8s.io/api/"):
				found[imp] = true
			case strings.HasPrefix(imp, module+"/"):
				queue = append(queue, strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("found no k8s.io/api import at all: the walk is broken")
	}
	return found
}

// packageImports lists the imports of the non-test Go files in dir.
func packageImports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var imports []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ast.Imports {
			imports = append(imports, strings.Trim(s.Path.Value, `"`))
		}
	}
	return imports
}

// moduleRoot is the directory of go.mod above the test's working directory
// and the module path it declares.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			return root, strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod declares no module")
	return "", ""
}
