package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// workloadKinds maps what users type (kubectl's names and short names,
// plain or with their API group) to a RebootPolicy target kind. A kind of
// another group (rollouts.example.com) is none of these.
var workloadKinds = map[string]autorebootv1alpha1.TargetKind{
	"deployment": autorebootv1alpha1.KindDeployment, "deployments": autorebootv1alpha1.KindDeployment, "deploy": autorebootv1alpha1.KindDeployment,
	"deployment.apps": autorebootv1alpha1.KindDeployment, "deployments.apps": autorebootv1alpha1.KindDeployment,
	"statefulset": autorebootv1alpha1.KindStatefulSet, "statefulsets": autorebootv1alpha1.KindStatefulSet, "sts": autorebootv1alpha1.KindStatefulSet,
	"statefulset.apps": autorebootv1alpha1.KindStatefulSet, "statefulsets.apps": autorebootv1alpha1.KindStatefulSet,
	"daemonset": autorebootv1alpha1.KindDaemonSet, "daemonsets": autorebootv1alpha1.KindDaemonSet, "ds": autorebootv1alpha1.KindDaemonSet,
	"daemonset.apps": autorebootv1alpha1.KindDaemonSet, "daemonsets.apps": autorebootv1alpha1.KindDaemonSet,
	"rollout": autorebootv1alpha1.KindRollout, "rollouts": autorebootv1alpha1.KindRollout, "ro": autorebootv1alpha1.KindRollout,
	"rollout.argoproj.io": autorebootv1alpha1.KindRollout, "rollouts.argoproj.io": autorebootv1alpha1.KindRollout,
}

// parseWorkload reads KIND/NAME.
func parseWorkload(arg string) (autorebootv1alpha1.TargetKind, string, error) {
	k, name, _ := strings.Cut(arg, "/")
	kind, ok := workloadKinds[strings.ToLower(k)]
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want REBOOTPOLICY or KIND/NAME with KIND deployment, statefulset, daemonset or rollout (Argo Rollouts)", arg)
	}
	return kind, name, nil
}

// rolloutGVK is Argo Rollouts' Rollout, read unstructured: the plugin does
// not depend on Argo Rollouts' types, and the kind may not be installed.
var rolloutGVK = schema.FromAPIVersionAndKind(autorebootv1alpha1.ArgoRolloutsAPIVersion, string(autorebootv1alpha1.KindRollout))

// workloadLabels reads the workload's labels (a selector target matches them).
func workloadLabels(ctx context.Context, cl client.Client, kind autorebootv1alpha1.TargetKind, ns, name string) (map[string]string, error) {
	var obj client.Object
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		obj = &appsv1.Deployment{}
	case autorebootv1alpha1.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case autorebootv1alpha1.KindRollout:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(rolloutGVK)
		obj = u
	default:
		obj = &appsv1.DaemonSet{}
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if kind == autorebootv1alpha1.KindRollout && meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("the cluster does not serve the Rollout kind (rollouts.argoproj.io, %s): Argo Rollouts is not installed, so there is no Rollout %s to restart",
				autorebootv1alpha1.ArgoRolloutsAPIVersion, name)
		}
		return nil, describeGetError(err, string(kind), ns, name)
	}
	return obj.GetLabels(), nil
}

// targets reports whether the RebootPolicy restarts the workload.
func targets(p *autorebootv1alpha1.RebootPolicy, kind autorebootv1alpha1.TargetKind, name string, lbls map[string]string) bool {
	t := p.Spec.Target
	if t.Kind != kind {
		return false
	}
	if t.Name != "" {
		return t.Name == name
	}
	if t.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Selector.LabelSelector())
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(lbls))
}

// policyForWorkload finds the one RebootPolicy of the namespace that
// targets the workload (or checks that --policy does).
func policyForWorkload(ctx context.Context, cl client.Client, ns, arg, want string) (string, error) {
	kind, name, err := parseWorkload(arg)
	if err != nil {
		return "", err
	}
	lbls, err := workloadLabels(ctx, cl, kind, ns, name)
	if err != nil {
		return "", err
	}
	var policies autorebootv1alpha1.RebootPolicyList
	if err := cl.List(ctx, &policies, client.InNamespace(ns)); err != nil {
		return "", describeListError(err, "RebootPolicies")
	}
	var names []string
	for i := range policies.Items {
		if targets(&policies.Items[i], kind, name, lbls) {
			names = append(names, policies.Items[i].Name)
		}
	}
	slices.Sort(names)
	what := fmt.Sprintf("%s %s/%s", kind, ns, name)
	switch {
	case want != "" && slices.Contains(names, want):
		return want, nil
	case want != "":
		return "", fmt.Errorf("RebootPolicy %q does not target %s (those that do: %s)", want, what, list(names))
	case len(names) == 0:
		return "", fmt.Errorf("no RebootPolicy in namespace %s targets %s: create one, or fire another by its name", ns, what)
	case len(names) > 1:
		return "", fmt.Errorf("%d RebootPolicies target %s (%s): choose one with --policy", len(names), what, strings.Join(names, ", "))
	}
	return names[0], nil
}
