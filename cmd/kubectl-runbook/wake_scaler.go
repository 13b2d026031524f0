package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

// scalerFor is the NSScaler to edit for namespace ns: the one selecting it,
// or want (which must select it). warning is set when want is not the
// NSScaler that acts on the namespace.
func scalerFor(ctx context.Context, cl client.Client, ns, want string) (name, warning string, err error) {
	var namespace corev1.Namespace
	if err := cl.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
		return "", "", describeGetError(err, "namespace", "", ns)
	}
	var list scalingv1alpha1.NSScalerList
	if err := cl.List(ctx, &list); err != nil {
		return "", "", describeListError(err, "NSScalers")
	}
	return chooseScaler(list.Items, ns, namespace.Labels, want)
}

// chooseScaler picks among the NSScalers the one for namespace ns (labels
// lbls), with the controller's own selection (nsscaler.Selects): when
// several select a namespace, the oldest acts on it.
func chooseScaler(all []scalingv1alpha1.NSScaler, ns string, lbls map[string]string, want string) (string, string, error) {
	var selecting []*scalingv1alpha1.NSScaler
	for i := range all {
		if nsscaler.Selects(&all[i], ns, lbls) {
			selecting = append(selecting, &all[i])
		}
	}
	slices.SortFunc(selecting, func(a, b *scalingv1alpha1.NSScaler) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var names []string
	for _, s := range selecting {
		names = append(names, s.Name)
	}
	switch {
	case want != "" && slices.Contains(names, want):
		if names[0] != want {
			return want, fmt.Sprintf("NSScaler %s selects namespace %s too and is older, so it is the one acting on it; an entry on %s takes effect only if %s stops selecting it", names[0], ns, want, names[0]), nil
		}
		return want, "", nil
	case want != "":
		if !slices.ContainsFunc(all, func(s scalingv1alpha1.NSScaler) bool { return s.Name == want }) {
			return "", "", fmt.Errorf("NSScaler %s not found", want)
		}
		return "", "", fmt.Errorf("NSScaler %s does not select namespace %s (those that do: %s)", want, ns, list(names))
	case len(names) == 0:
		return "", "", fmt.Errorf("no NSScaler selects namespace %s: nothing parks it", ns)
	case len(names) > 1:
		return "", "", fmt.Errorf("namespace %s is selected by %d NSScalers (%s; %s is the oldest and acts on it): choose one with --scaler", ns, len(names), strings.Join(names, ", "), names[0])
	}
	return names[0], "", nil
}
