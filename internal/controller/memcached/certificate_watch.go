package memcached

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// watchCertificates adds the watch of cert-manager Certificates to b when
// the cluster serves the kind when the manager starts, like the other
// optional kinds: a cluster without cert-manager costs no informer (and
// no failing list). cert-manager installed later is seen by the
// reconciles of Memcacheds with an issuerRef (certManagerRecheck), and
// their Certificates' progress by the Secret rechecks; a restart of the
// manager adds the watch.
func watchCertificates(mgr ctrl.Manager, b *builder.Builder, sameName handler.EventHandler) (*builder.Builder, error) {
	served, err := servesKind(mgr.GetRESTMapper(), certificateGVK)
	if err != nil {
		return nil, err
	}
	if !served {
		mgr.GetLogger().WithName(Name).Info("cert-manager's Certificate kind is not served: Certificates are not watched; restart the manager after installing cert-manager",
			"kind", certificateGVK.String())
		return b, nil
	}
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(certificateGVK)
	return b.Watches(cert, sameName, builder.WithPredicates(ownedFilter(certificateChanged))), nil
}

// certificateChanged: what prepareIssuance reads of the status (its Ready
// condition) and what a renewal changes (revision, notAfter); the spec is
// in the generation.
func certificateChanged(o, n *unstructured.Unstructured) bool {
	for _, path := range [][]string{{"status", "revision"}, {"status", "notAfter"}} {
		a, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		b, _, _ := unstructured.NestedFieldNoCopy(n.Object, path...)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return true
		}
	}
	or, om := certificateReady(o)
	nr, nm := certificateReady(n)
	return or != nr || om != nm
}
