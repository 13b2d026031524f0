package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/memcached"
	"github.com/runbook-dev/runbook/internal/registry"
)

// registerMemcached: Memcached caches (cache.runbook.dev), see docs/memcached.md.
func registerMemcached(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet, _ sharedFlags) {
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	workers := fs.Int("memcached-max-concurrent-reconciles", 4, "Memcached objects the memcached controller reconciles in parallel.")
	reg.Add("memcached", func(mgr ctrl.Manager) error {
		return (&memcached.Reconciler{
			Client:                  mgr.GetClient(),
			Recorder:                mgr.GetEventRecorder("memcached-controller"),
			Clock:                   clock.RealClock{},
			FieldManager:            memcached.DefaultFieldManager,
			MaxConcurrentReconciles: *workers,
		}).SetupWithManager(mgr)
	})
}
