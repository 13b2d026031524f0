package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	memcached "github.com/runbook-dev/runbook/internal/controller/memcached"
	rebootpolicy "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
	"github.com/runbook-dev/runbook/internal/registry"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscaler "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// registerControllers is the one place that lists the controllers built into
// the binary. Each controller's block adds its API group to the scheme, binds
// the flags it owns and registers a setup function that builds its reconciler
// with every dependency passed in (no package-level state).
func registerControllers(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet) {
	// +runbook:controllers
	// The manager's own namespace: NSScalers never park it, and the
	// RebootPolicy fingerprint key lives there.
	operatorNamespace := fs.String("operator-namespace", os.Getenv("POD_NAMESPACE"),
		"The operator's own namespace, which NSScalers never park and where the RebootPolicy fingerprint key Secret lives (default $POD_NAMESPACE).")
	// rebootpolicy: RebootPolicies (autoreboot.runbook.dev) restart workloads on triggers, see docs/rebootpolicy.md.
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	rbp := bindRebootPolicyFlags(fs)
	reg.Add("rebootpolicy", func(mgr ctrl.Manager) error {
		opts, err := rbp.options(*operatorNamespace)
		if err != nil {
			return err
		}
		if err := opts.Metrics.Register(crmetrics.Registry); err != nil {
			return err
		}
		_, err = rebootpolicy.Setup(mgr, opts)
		return err
	})
	// nsscaler: NSScalers (scaling.runbook.dev) park namespaces, see docs/nsscaler.md.
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	nsscalerWrites := fs.Int("nsscaler-write-concurrency", 16, "Workload writes the nsscaler controller keeps in flight.")
	nsscalerQPS := fs.Float64("nsscaler-write-qps", 0,
		"Workload writes per second the nsscaler controller may send; 0: no limit but --nsscaler-write-concurrency.")
	reg.Add("nsscaler", func(mgr ctrl.Manager) error {
		metrics, err := nsscaler.NewMetrics(crmetrics.Registry)
		if err != nil {
			return err
		}
		return (&nsscaler.Reconciler{
			Client:            mgr.GetClient(),
			APIReader:         mgr.GetAPIReader(),
			RESTMapper:        mgr.GetRESTMapper(),
			Recorder:          mgr.GetEventRecorder(nsscaler.ControllerName),
			Clock:             clock.RealClock{},
			Metrics:           metrics,
			OperatorNamespace: *operatorNamespace,
			WriteConcurrency:  *nsscalerWrites,
			WriteQPS:          *nsscalerQPS,
		}).SetupWithManager(mgr)
	})
	// memcached: Memcached caches (cache.runbook.dev), see docs/memcached.md.
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	memcachedWorkers := fs.Int("memcached-max-concurrent-reconciles", 4, "Memcached objects the memcached controller reconciles in parallel.")
	reg.Add("memcached", func(mgr ctrl.Manager) error {
		return (&memcached.Reconciler{
			Client:                  mgr.GetClient(),
			Recorder:                mgr.GetEventRecorder("memcached-controller"),
			Clock:                   clock.RealClock{},
			FieldManager:            memcached.DefaultFieldManager,
			MaxConcurrentReconciles: *memcachedWorkers,
		}).SetupWithManager(mgr)
	})
}
