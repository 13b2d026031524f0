package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/memcached"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/registry"
)

// registerMemcached: Memcached caches (cache.runbook.dev), see docs/memcached.md.
func registerMemcached(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet, shared sharedFlags) {
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	workers := fs.Int("memcached-max-concurrent-reconciles", memcached.DefaultMaxConcurrentReconciles, "Memcached objects the memcached controller reconciles in parallel.")
	resync := fs.Duration("memcached-secret-resync-period", memcached.DefaultSecretResync,
		"How often the TLS and auth Secrets of a Memcached are read again (they are not watched): a certificate renewal reaches the pods within this period.")
	tlsAgent := fs.String("memcached-tls-agent-image", memcached.DefaultTLSAgentImage,
		"Image of the TLS agent that runs beside memcached when spec.tls is set and loads renewed certificates in place.")
	clusterIssuers := fs.String("memcached-allowed-cluster-issuers", "",
		"Comma-separated cert-manager ClusterIssuers a Memcached's spec.tls.issuerRef may name: name for cert-manager.io, group/name for an external issuer. Empty: none (Issuers of the Memcached's own namespace are always allowed).")
	clusterDomain := fs.String("memcached-cluster-domain", memcached.DefaultClusterDomain,
		"DNS domain of the cluster's Services: the last of the DNS names a Memcached's issued certificate defaults to.")
	reg.Add(memcached.Name, func(mgr ctrl.Manager) error {
		metrics := memcached.NewMetrics()
		if err := metrics.Register(crmetrics.Registry); err != nil {
			return err
		}
		budget, err := shared.eventBudget()
		if err != nil {
			return err
		}
		// The flag has always meant one worker at 0 or below; Options would
		// read 0 as its default.
		_, err = memcached.Setup(mgr, memcached.Options{
			MaxConcurrentReconciles: max(*workers, 1),
			SecretResync:            *resync,
			OperatorNamespace:       *shared.operatorNamespace,
			FingerprintKeySecret:    fingerprintKeySecret(fs),
			Metrics:                 metrics,
			EventBudget:             budget,
			TLSAgentImage:           *tlsAgent,
			Issuance: memcached.IssuancePolicy{
				AllowedClusterIssuers: splitList(*clusterIssuers),
				ClusterDomain:         *clusterDomain,
			},
		})
		return err
	})
}

// fingerprintKeySecret is the key Secret's name of --fingerprint-key-secret
// (bound by the RebootPolicy controller), so that both controllers share
// one key Secret; its default when the flag does not exist.
func fingerprintKeySecret(fs *flag.FlagSet) string {
	if f := fs.Lookup("fingerprint-key-secret"); f != nil {
		return f.Value.String()
	}
	return fingerprint.DefaultSecretName
}
