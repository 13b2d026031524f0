package nsscaler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// The GitOps scenario (BENCH_NSSCALER_GITOPS=N): the first N Deployments
// (N/10 namespaces) carry the labels Flux's kustomize-controller puts on
// what it applies, each namespace's Kustomization (in flux-system, not
// parked; the real CRD, generated from Flux's API module) deploys into it,
// and the NSScaler has spec.gitOps.flux: the manager suspends those
// Kustomizations before it parks and resumes them after it restores. The
// raw client writes only the Deployments: the Kustomization writes show in
// the SUMMARY's other requests (patch kustomizations), counted apart.
const fluxNamespace = "flux-system"

var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// gitOpsWorkloads is BENCH_NSSCALER_GITOPS (0: the scenario is off), a
// whole number of namespaces.
func gitOpsWorkloads() int {
	n, err := strconv.Atoi(os.Getenv("BENCH_NSSCALER_GITOPS"))
	if err != nil || n < 0 {
		return 0
	}
	return n / perNamespace * perNamespace
}

// gitOpsCRDs are the CRDs the scenario installs.
func gitOpsCRDs(workloads int) []string {
	if workloads == 0 {
		return nil
	}
	return []string{filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "kustomize.toolkit.fluxcd.io_kustomizations.yaml")}
}

// gitOpsNamespace: the namespace's Deployments are Flux's.
func gitOpsNamespace(n, workloads int) bool { return n < workloads/perNamespace }

// createKustomization creates the Kustomization that deploys into ns.
func createKustomization(ctx context.Context, c client.Client, ns string) error {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"interval": "10m", "prune": true, "targetNamespace": ns,
		"sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"},
	}}}
	u.SetGroupVersionKind(kustomizationGVK)
	u.SetNamespace(fluxNamespace)
	u.SetName(ns)
	return c.Create(ctx, u, client.FieldOwner(creator))
}

// createFluxNamespace creates flux-system.
func createFluxNamespace(ctx context.Context, c client.Client) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}})
}

// fluxLabels are the labels kustomize-controller puts on what it applies.
func fluxLabels(ns string) map[string]string {
	return map[string]string{"kustomize.toolkit.fluxcd.io/name": ns, "kustomize.toolkit.fluxcd.io/namespace": fluxNamespace}
}

// withGitOps turns on spec.gitOps.flux in the scenario.
func withGitOps(spec scalingv1alpha1.NSScalerSpec, workloads int) scalingv1alpha1.NSScalerSpec {
	if workloads > 0 {
		spec.GitOps = &scalingv1alpha1.GitOpsSpec{Flux: true}
	}
	return spec
}

func gitOpsTitle(workloads int) string {
	if workloads == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d with Flux owners, spec.gitOps.flux)", workloads)
}
