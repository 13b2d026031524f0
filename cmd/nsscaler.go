package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/internal/registry"
)

// registerNSScaler: NSScalers (scaling.runbook.dev) park namespaces, see docs/nsscaler.md.
func registerNSScaler(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet, shared sharedFlags) {
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	writes := fs.Int("nsscaler-write-concurrency", 16, "Workload writes the nsscaler controller keeps in flight.")
	qps := fs.Float64("nsscaler-write-qps", 0,
		"Workload writes per second the nsscaler controller may send; 0: no limit but --nsscaler-write-concurrency.")
	workers := fs.Int("nsscaler-max-concurrent-reconciles", 1,
		"NSScalers the nsscaler controller reconciles in parallel; 1 by default, since NSScalers interact through namespace ownership.")
	reg.Add(nsscaler.Name, func(mgr ctrl.Manager) error {
		metrics, err := nsscaler.NewMetrics(crmetrics.Registry)
		if err != nil {
			return err
		}
		_, err = nsscaler.Setup(mgr, nsscaler.Options{
			Clock:                   clock.RealClock{},
			Metrics:                 metrics,
			OperatorNamespace:       *shared.operatorNamespace,
			WriteConcurrency:        *writes,
			WriteQPS:                *qps,
			MaxConcurrentReconciles: *workers,
		})
		return err
	})
}
