package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/memcached"
	"github.com/runbook-dev/runbook/internal/registry"
)

// registerMemcached: Memcached caches (cache.runbook.dev), see docs/memcached.md.
func registerMemcached(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet, _ sharedFlags) {
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	workers := fs.Int("memcached-max-concurrent-reconciles", 4, "Memcached objects the memcached controller reconciles in parallel.")
	reg.Add(memcached.Name, func(mgr ctrl.Manager) error {
		// The flag has always meant one worker at 0 or below; Options would
		// read 0 as its default.
		_, err := memcached.Setup(mgr, memcached.Options{MaxConcurrentReconciles: max(*workers, 1)})
		return err
	})
}
