package main

import (
	"flag"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

// reloaderCompatFlags turn on and bound the Reloader compatibility mode
// (docs/reloader-compat.md), part of the rebootpolicy controller.
type reloaderCompatFlags struct {
	enabled         *bool
	maxPerNamespace *int
	settleDelay     *time.Duration
}

func bindReloaderCompatFlags(fs *flag.FlagSet) *reloaderCompatFlags {
	return &reloaderCompatFlags{
		enabled: fs.Bool("reloader-compat", false,
			"Honour Stakater Reloader's workload annotations (reloader.stakater.com/auto, .../search, configmap|secret.reloader.stakater.com/reload, ...) on Deployments, StatefulSets and DaemonSets: each annotated workload gets a RebootPolicy."),
		maxPerNamespace: fs.Int("reloader-compat-max-per-namespace", 100,
			"Most workloads of one namespace the Reloader compatibility mode makes RebootPolicies for, first come first served; 0 means no limit."),
		settleDelay: fs.Duration("reloader-compat-settle-delay", 0,
			"settleDelay of the Reloader compatibility mode's RebootPolicies (0: restart at once, like Reloader)."),
	}
}

func setupReloaderCompat(mgr ctrl.Manager, f *reloaderCompatFlags, namespaces []string, budget *status.EventBudget) error {
	if !*f.enabled {
		return nil
	}
	m := reloadercompat.NewMetrics()
	if err := m.Register(crmetrics.Registry); err != nil {
		return err
	}
	return reloadercompat.Setup(mgr, reloadercompat.Options{
		MaxPerNamespace: *f.maxPerNamespace, SettleDelay: *f.settleDelay, Namespaces: namespaces, Metrics: m,
		EventBudget: budget,
	})
}
