package nsscaler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// namespaceMatcher decides whether an NSScaler selects a namespace.
type namespaceMatcher struct {
	prefix   string
	selector labels.Selector // nil when the spec has none
}

func newNamespaceMatcher(spec scalingv1alpha1.NSScalerSpec) (namespaceMatcher, error) {
	m := namespaceMatcher{prefix: spec.NamespacePrefix}
	if spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
		if err != nil {
			return namespaceMatcher{}, fmt.Errorf("namespaceSelector: %w", err)
		}
		m.selector = sel
	}
	return m, nil
}

// matches applies the prefix and the label selector; both must match when
// both are set. A matcher with neither (rejected by the CRD) matches nothing.
func (m namespaceMatcher) matches(name string, nsLabels map[string]string) bool {
	if m.prefix == "" && (m.selector == nil || m.selector.Empty()) {
		return false
	}
	if m.prefix != "" && !strings.HasPrefix(name, m.prefix) {
		return false
	}
	if m.selector != nil && !m.selector.Matches(labels.Set(nsLabels)) {
		return false
	}
	return true
}

// Namespace is what selection needs to know of a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// olderThan orders NSScalers by creation time, then name: the older one wins
// a contested namespace.
func olderThan(a, b *scalingv1alpha1.NSScaler) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

// PlanNamespaces computes self's plan, as if it were asleep (see
// Plan.awake for the schedule and the wake entries), from every NSScaler in the cluster (self
// included) and every namespace. An NSScaler whose selector is invalid
// selects nothing. Pure function: no I/O.
func PlanNamespaces(self *scalingv1alpha1.NSScaler, all []scalingv1alpha1.NSScaler, namespaces []Namespace, protection Protection) (Plan, error) {
	plan := Plan{Parked: sets.New[string](), Active: sets.New[string](), Foreign: sets.New[string](), Protected: sets.New[string](), Woken: sets.New[string]()}
	selfMatcher, err := newNamespaceMatcher(self.Spec)
	if err != nil {
		return plan, err
	}
	others := rivalsOf(self, all)
	whitelist := sets.New(self.Spec.Whitelist...)
	for _, ns := range namespaces {
		if !selfMatcher.matches(ns.Name, ns.Labels) {
			continue
		}
		if protection.Protects(ns) {
			plan.Protected.Insert(ns.Name)
			continue
		}
		owner, contested := ownerOf(self, others, ns)
		if contested {
			plan.Conflicts = append(plan.Conflicts, scalingv1alpha1.NamespaceConflict{Namespace: ns.Name, Owner: owner.Name})
		}
		switch {
		case owner != self:
			plan.Foreign.Insert(ns.Name)
		case whitelist.Has(ns.Name):
			plan.Active.Insert(ns.Name)
		default:
			plan.Parked.Insert(ns.Name)
		}
	}
	slices.SortFunc(plan.Conflicts, func(a, b scalingv1alpha1.NamespaceConflict) int { return cmp.Compare(a.Namespace, b.Namespace) })
	return plan, nil
}

// rival is another NSScaler, with its matcher.
type rival struct {
	scaler  *scalingv1alpha1.NSScaler
	matcher namespaceMatcher
}

// rivalsOf are the NSScalers other than self that can select anything.
func rivalsOf(self *scalingv1alpha1.NSScaler, all []scalingv1alpha1.NSScaler) []rival {
	var rivals []rival
	for i := range all {
		s := &all[i]
		if s.Name == self.Name {
			continue
		}
		m, err := newNamespaceMatcher(s.Spec)
		if err != nil {
			continue // selects nothing; its own status says why
		}
		rivals = append(rivals, rival{scaler: s, matcher: m})
	}
	return rivals
}

// ownerOf returns the NSScaler that acts on a namespace self selects: the
// oldest of self and the rivals selecting it too. contested is true when a
// rival selects it.
func ownerOf(self *scalingv1alpha1.NSScaler, rivals []rival, ns Namespace) (owner *scalingv1alpha1.NSScaler, contested bool) {
	owner = self
	for _, r := range rivals {
		if !r.matcher.matches(ns.Name, ns.Labels) {
			continue
		}
		contested = true
		if olderThan(r.scaler, owner) {
			owner = r.scaler
		}
	}
	return owner, contested
}

// Selects reports whether the NSScaler's spec selects the namespace (before
// protection, whitelist and conflicts). Used to map namespace-scoped events
// to NSScalers.
func Selects(s *scalingv1alpha1.NSScaler, name string, nsLabels map[string]string) bool {
	m, err := newNamespaceMatcher(s.Spec)
	if err != nil {
		return false
	}
	return m.matches(name, nsLabels)
}
