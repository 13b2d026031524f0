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
	workers := fs.Int("memcached-max-concurrent-reconciles", 4, "Memcached objects the memcached controller reconciles in parallel.")
	resync := fs.Duration("memcached-secret-resync-period", memcached.DefaultSecretResync,
		"How often the TLS and auth Secrets of a Memcached are read again (they are not watched): a certificate renewal reaches the pods within this period.")
	reg.Add(memcached.Name, func(mgr ctrl.Manager) error {
		metrics := memcached.NewMetrics()
		if err := metrics.Register(crmetrics.Registry); err != nil {
			return err
		}
		// The flag has always meant one worker at 0 or below; Options would
		// read 0 as its default.
		_, err := memcached.Setup(mgr, memcached.Options{
			MaxConcurrentReconciles: max(*workers, 1),
			SecretResync:            *resync,
			OperatorNamespace:       *shared.operatorNamespace,
			FingerprintKeySecret:    fingerprintKeySecret(fs),
			Metrics:                 metrics,
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
