package nsscaler

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The labels and annotation GitOps tools put on the objects they apply.
const (
	labelKustomizeName      = "kustomize.toolkit.fluxcd.io/name"
	labelKustomizeNamespace = "kustomize.toolkit.fluxcd.io/namespace"
	labelHelmName           = "helm.toolkit.fluxcd.io/name"
	labelHelmNamespace      = "helm.toolkit.fluxcd.io/namespace"
	// AnnotationArgoCDTrackingID is Argo CD's annotation tracking:
	// "<app>:<group>/<kind>:<namespace>/<name>", <app> being
	// "<namespace>_<name>" for an Application outside Argo CD's own
	// namespace.
	AnnotationArgoCDTrackingID = "argocd.argoproj.io/tracking-id"
	// labelArgoCDInstance is Argo CD's label tracking (its default before
	// 3.0): the Application's name, in the same form.
	labelArgoCDInstance = "app.kubernetes.io/instance"
)

// maxTrackingIDLength bounds the tracking annotation the cache keeps: an
// app name, a group/kind and a namespace/name fit well within it.
const maxTrackingIDLength = 2*validation.DNS1123SubdomainMaxLength + 2*validation.DNS1123LabelMaxLength + 64

// gitOpsRef names a GitOps object a workload says manages it.
type gitOpsRef struct {
	kind *gitOpsKind
	key  types.NamespacedName
}

// gitOpsRefsOf reads the GitOps objects a workload's labels and annotation
// name. These are claims of whoever may edit the workload: they only say
// where to look, never what to pause (see gitOpsKind.manages).
// argoNamespace is where Argo CD keeps Applications named without one.
func gitOpsRefsOf(w Workload, argoNamespace string) []gitOpsRef {
	var refs []gitOpsRef
	add := func(k *gitOpsKind, ns, name string) {
		if validation.IsDNS1123Label(ns) == nil && validation.IsDNS1123Subdomain(name) == nil {
			refs = append(refs, gitOpsRef{kind: k, key: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	if name, ns := w.Labels[labelKustomizeName], w.Labels[labelKustomizeNamespace]; name != "" {
		add(gitOpsKustomization, ns, name)
	}
	if name, ns := w.Labels[labelHelmName], w.Labels[labelHelmNamespace]; name != "" {
		add(gitOpsHelmRelease, ns, name)
	}
	if argoNamespace == "" {
		return refs
	}
	apps := map[types.NamespacedName]struct{}{}
	if app, ok := argoAppOfTrackingID(w.ArgoCDTrackingID); ok {
		apps[argoAppKey(app, argoNamespace)] = struct{}{}
	}
	if app := w.Labels[labelArgoCDInstance]; app != "" {
		apps[argoAppKey(app, argoNamespace)] = struct{}{}
	}
	for k := range apps {
		add(gitOpsApplication, k.Namespace, k.Name)
	}
	return refs
}

// argoAppOfTrackingID is the application part of a tracking id.
func argoAppOfTrackingID(id string) (string, bool) {
	app, rest, found := strings.Cut(id, ":")
	if !found || app == "" || !strings.Contains(rest, ":") {
		return "", false
	}
	return app, true
}

// argoAppKey locates an Application named as Argo CD names it on the
// objects it applies.
func argoAppKey(app, argoNamespace string) types.NamespacedName {
	if ns, name, found := strings.Cut(app, "_"); found {
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	return types.NamespacedName{Namespace: argoNamespace, Name: app}
}
