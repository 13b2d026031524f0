package nsscaler

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// LabelProtected on a namespace ("true") keeps every NSScaler from parking
// it. Namespace labels are written by whoever may update the namespace
// object (cluster-scoped: normally an admin, not the namespace's tenants).
const LabelProtected = "scaling.runbook.dev/protected"

// Protection says which namespaces are never parked, whatever an
// NSScaler's spec says: the system namespaces, the operator's own, those
// matching the admin's globs (--nsscaler-protected-namespaces) and those
// labelled LabelProtected=true.
type Protection struct {
	names sets.Set[string]
	globs []string
}

// NewProtection builds the protection from the operator's namespace (may
// be empty) and the admin's globs (path.Match syntax: *, ?, [a-z]).
func NewProtection(operatorNamespace string, globs []string) (Protection, error) {
	p := Protection{names: ProtectedNamespaces(operatorNamespace)}
	for _, g := range globs {
		if g == "" {
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			return Protection{}, fmt.Errorf("protected namespace glob %q: %w", g, err)
		}
		p.globs = append(p.globs, g)
	}
	return p, nil
}

// ProtectedNamespaces is the set of namespaces protected by name: the
// system namespaces plus the operator's own (when known).
func ProtectedNamespaces(operatorNamespace string) sets.Set[string] {
	s := sets.New(metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease)
	if operatorNamespace != "" {
		s.Insert(operatorNamespace)
	}
	return s
}

// Protects reports whether the namespace is never parked.
func (p Protection) Protects(ns Namespace) bool {
	if p.names.Has(ns.Name) || ns.Labels[LabelProtected] == "true" {
		return true
	}
	for _, g := range p.globs {
		if ok, _ := path.Match(g, ns.Name); ok {
			return true
		}
	}
	return false
}
