package memcached

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// DefaultClusterDomain is the DNS domain of the cluster's Services, the
// last of the default DNS names.
const DefaultClusterDomain = "cluster.local"

// IssuancePolicy is what the administrator lets tenants issue.
type IssuancePolicy struct {
	// AllowedClusterIssuers are the ClusterIssuers a Memcached may name:
	// "name" for cert-manager.io, "group/name" for an external issuer's
	// group. Empty: none.
	AllowedClusterIssuers []string
	// ClusterDomain is the cluster's DNS domain; DefaultClusterDomain
	// when empty.
	ClusterDomain string
}

// issuerOf is ref with the CRD's defaults (for objects that never went
// through the apiserver).
func issuerOf(ref *cachev1alpha1.IssuerReference) cachev1alpha1.IssuerReference {
	return cachev1alpha1.IssuerReference{
		Name:  ref.Name,
		Kind:  cmp.Or(ref.Kind, cachev1alpha1.IssuerKindIssuer),
		Group: cmp.Or(ref.Group, cachev1alpha1.CertManagerGroup),
	}
}

// issuerRefused says why ref may not sign (empty: it may).
func (r *Reconciler) issuerRefused(ref cachev1alpha1.IssuerReference) string {
	switch ref.Kind {
	case cachev1alpha1.IssuerKindIssuer:
		if ref.Group != cachev1alpha1.CertManagerGroup {
			return fmt.Sprintf("issuerRef names an Issuer of group %s; only cert-manager.io Issuers (of this namespace) may be named, an external issuer only as a ClusterIssuer the administrator allows", ref.Group)
		}
		return ""
	case cachev1alpha1.IssuerKindClusterIssuer:
		want := ref.Name
		if ref.Group != cachev1alpha1.CertManagerGroup {
			want = ref.Group + "/" + ref.Name
		}
		if slices.Contains(r.Issuance.AllowedClusterIssuers, want) {
			return ""
		}
		return fmt.Sprintf("ClusterIssuer %s is not allowed: the administrator allows Memcacheds only the ClusterIssuers of the manager's --memcached-allowed-cluster-issuers (%s)",
			want, allowedList(r.Issuance.AllowedClusterIssuers))
	}
	return fmt.Sprintf("issuerRef.kind %q is neither Issuer nor ClusterIssuer", ref.Kind)
}

func allowedList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// serviceNames are the names of the Memcached's headless Service, the
// shortest first.
func (r *Reconciler) serviceNames(mc *cachev1alpha1.Memcached) []string {
	svc := mc.Name + "." + mc.Namespace + ".svc"
	return []string{mc.Name, mc.Name + "." + mc.Namespace, svc, svc + "." + r.clusterDomain()}
}

func (r *Reconciler) clusterDomain() string {
	return strings.TrimSuffix(cmp.Or(r.Issuance.ClusterDomain, DefaultClusterDomain), ".")
}

// dnsNames are tls.dnsNames, or by default the Service's names and, for a
// StatefulSet (whose clients address each instance by its own name, see
// status.servers), the wildcards of the instances under the Service.
func (r *Reconciler) dnsNames(mc *cachev1alpha1.Memcached, kind cachev1alpha1.WorkloadKind) []string {
	if names := mc.Spec.TLS.DNSNames; len(names) > 0 {
		return slices.Clone(names)
	}
	names := r.serviceNames(mc)
	if kind == cachev1alpha1.WorkloadStatefulSet {
		names = append(names, "*."+names[2], "*."+names[3])
	}
	return names
}

// dnsNamesRefused says which of names is not the Memcached's own (empty:
// all are): a name of its Service, or one DNS label (or the wildcard)
// under the Service's namespaced names, where only its instances resolve.
func (r *Reconciler) dnsNamesRefused(mc *cachev1alpha1.Memcached, names []string) string {
	own := r.serviceNames(mc)
	var bad []string
	for _, n := range names {
		if !slices.Contains(own, n) && !underService(n, own[2:]) {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("tls.dnsNames %s are not names of this Memcached's Service: allowed are %s and one label or * under the last two",
		strings.Join(bad, ", "), strings.Join(own, ", "))
}

func underService(name string, parents []string) bool {
	for _, p := range parents {
		label, ok := strings.CutSuffix(name, "."+p)
		if ok && (label == "*" || len(validation.IsDNS1123Label(label)) == 0) {
			return true
		}
	}
	return false
}
