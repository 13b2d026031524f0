package nsscaler

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;patch

// gitOpsKind is a kind of GitOps object the controller can pause: where its
// pause lives, and how its own spec and status tell which namespaces it
// manages. Objects are read and patched as unstructured: no GitOps tool's
// Go module is imported.
type gitOpsKind struct {
	kind string
	gvk  schema.GroupVersionKind
	// flux: enabled by spec.gitOps.flux, else by spec.gitOps.argoCD.
	flux bool
	// field is the path of the field a pause changes.
	field []string
	// paused is the value a pause writes there (nil: the field is removed).
	paused any
	// isPaused: the object does not act on its own now (already
	// suspended, or without automated sync).
	isPaused func(u *unstructured.Unstructured) bool
	// manages: the object's own spec or status shows that it deploys into
	// namespace ns.
	manages func(u *unstructured.Unstructured, ns string) bool
}

var (
	gitOpsKustomization = &gitOpsKind{
		kind: scalingv1alpha1.GitOpsKindKustomization,
		gvk:  schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"},
		flux: true, field: []string{"spec", "suspend"}, paused: true,
		isPaused: fluxSuspended, manages: kustomizationManages,
	}
	gitOpsHelmRelease = &gitOpsKind{
		kind: scalingv1alpha1.GitOpsKindHelmRelease,
		gvk:  schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
		flux: true, field: []string{"spec", "suspend"}, paused: true,
		isPaused: fluxSuspended, manages: helmReleaseManages,
	}
	gitOpsApplication = &gitOpsKind{
		kind:  scalingv1alpha1.GitOpsKindApplication,
		gvk:   schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"},
		field: []string{"spec", "syncPolicy", "automated"}, paused: nil,
		isPaused: argoNotAutomated, manages: applicationManages,
	}
	gitOpsKinds = []*gitOpsKind{gitOpsKustomization, gitOpsHelmRelease, gitOpsApplication}
)

// enabled reports whether the spec asks to pause objects of the kind.
func (k *gitOpsKind) enabled(spec *scalingv1alpha1.GitOpsSpec) bool {
	if spec == nil {
		return false
	}
	if k.flux {
		return spec.Flux
	}
	return spec.ArgoCD
}

func fluxSuspended(u *unstructured.Unstructured) bool {
	s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	return s
}

// argoNotAutomated: no spec.syncPolicy.automated, or one switched off
// (automated.enabled: false, Argo CD 3): Argo CD neither self-heals nor
// syncs new commits by itself.
func argoNotAutomated(u *unstructured.Unstructured) bool {
	a, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "syncPolicy", "automated")
	if !found || a == nil {
		return true
	}
	m, ok := a.(map[string]any)
	if !ok {
		return true
	}
	enabled, set := m["enabled"].(bool)
	return set && !enabled
}

// kustomizationManages: spec.targetNamespace is ns, or the inventory (which
// kustomize-controller writes after applying) holds an object in ns. An
// inventory entry's id is "<namespace>_<name>_<group>_<kind>"; a namespace
// name has no underscore, so the prefix is exact.
func kustomizationManages(u *unstructured.Unstructured, ns string) bool {
	if t, _, _ := unstructured.NestedString(u.Object, "spec", "targetNamespace"); t == ns {
		return true
	}
	entries, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "entries")
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if id, ok := m["id"].(string); ok && strings.HasPrefix(id, ns+"_") {
			return true
		}
	}
	return false
}

// helmReleaseManages: the release is installed into ns — spec.targetNamespace,
// else the HelmRelease's own namespace — or its history says a release was
// (status.history[].namespace, written by helm-controller).
func helmReleaseManages(u *unstructured.Unstructured, ns string) bool {
	target, _, _ := unstructured.NestedString(u.Object, "spec", "targetNamespace")
	if target == "" {
		target = u.GetNamespace()
	}
	if target == ns {
		return true
	}
	history, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	for _, h := range history {
		if m, ok := h.(map[string]any); ok && m["namespace"] == ns {
			return true
		}
	}
	return false
}

// applicationManages: spec.destination.namespace is ns, or Argo CD's
// status.resources lists an object in ns.
func applicationManages(u *unstructured.Unstructured, ns string) bool {
	if d, _, _ := unstructured.NestedString(u.Object, "spec", "destination", "namespace"); d == ns {
		return true
	}
	resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range resources {
		if m, ok := r.(map[string]any); ok && m["namespace"] == ns {
			return true
		}
	}
	return false
}
