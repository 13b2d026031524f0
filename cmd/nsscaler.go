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
	writes := fs.Int("nsscaler-write-concurrency", nsscaler.DefaultWriteConcurrency, "Workload writes the nsscaler controller keeps in flight.")
	qps := fs.Float64("nsscaler-write-qps", 0,
		"Workload writes per second the nsscaler controller may send; 0: no limit but --nsscaler-write-concurrency.")
	workers := fs.Int("nsscaler-max-concurrent-reconciles", nsscaler.DefaultMaxConcurrentReconciles,
		"NSScalers the nsscaler controller reconciles in parallel; 1 by default, since NSScalers interact through namespace ownership.")
	protected := fs.String("nsscaler-protected-namespaces", "",
		"Comma-separated globs (*, ?, [a-z]) of namespaces no NSScaler ever parks, besides kube-system, kube-public, kube-node-lease, the operator's namespace and namespaces labelled scaling.runbook.dev/protected=true.")
	fightThreshold := fs.Int("nsscaler-fight-threshold", nsscaler.DefaultFightThreshold,
		"Scale-ups of a parked workload by another field manager, within --nsscaler-fight-window, after which the nsscaler controller stops re-parking it for a while.")
	fightWindow := fs.Duration("nsscaler-fight-window", nsscaler.DefaultFightWindow,
		"The window in which --nsscaler-fight-threshold scale-ups make a workload contested.")
	fightBackoff := fs.Duration("nsscaler-fight-backoff", nsscaler.DefaultFightBackoff,
		"How long a contested workload is first left alone; doubled each time the fight resumes.")
	fightMaxBackoff := fs.Duration("nsscaler-fight-max-backoff", nsscaler.DefaultFightMaxBackoff,
		"The longest a contested workload is left alone at once.")
	argoCDNamespace := fs.String("nsscaler-argocd-namespace", nsscaler.DefaultArgoCDNamespace,
		"The namespace of Argo CD's own Applications: where an NSScaler with spec.gitOps.argoCD looks for the Application a workload's Argo CD tracking names without a namespace.")
	reg.Add(nsscaler.Name, func(mgr ctrl.Manager) error {
		metrics, err := nsscaler.NewMetrics(crmetrics.Registry)
		if err != nil {
			return err
		}
		budget, err := shared.eventBudget()
		if err != nil {
			return err
		}
		_, err = nsscaler.Setup(mgr, nsscaler.Options{
			Clock:               clock.RealClock{},
			Metrics:             metrics,
			OperatorNamespace:   *shared.operatorNamespace,
			ProtectedNamespaces: splitList(*protected),
			Fights: nsscaler.FightPolicy{
				Threshold: *fightThreshold, Window: *fightWindow, Backoff: *fightBackoff, MaxBackoff: *fightMaxBackoff,
			},
			WriteConcurrency:        *writes,
			WriteQPS:                *qps,
			MaxConcurrentReconciles: *workers,
			ArgoCDNamespace:         *argoCDNamespace,
			EventBudget:             budget,
		})
		return err
	})
}
