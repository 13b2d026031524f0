package main

import (
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/registry"
)

// sharedFlags are the flags more than one controller reads.
type sharedFlags struct {
	// operatorNamespace: NSScalers never park it, and the RebootPolicy
	// fingerprint key lives there.
	operatorNamespace *string
	// eventBudget is the one bound on the events of every controller
	// (--event-qps, --event-burst), built by the first controller set up,
	// after flag.Parse, and handed to the others.
	eventBudget func() (*status.EventBudget, error)
}

// registerControllers is the one place that lists the controllers built into
// the binary. Each controller's register function (in the file named after
// it) adds its API group to the scheme, binds the flags it owns and
// registers a setup function that builds it with every dependency passed in
// (no package-level state).
func registerControllers(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet) {
	eventQPS := fs.Float64("event-qps", status.DefaultEventQPS,
		"Events per second all controllers together may record; events over it are dropped and counted in runbook_events_dropped_total. Negative: no limit.")
	eventBurst := fs.Int("event-burst", status.DefaultEventBurst,
		"Events all controllers together may record at once above --event-qps; a fifth of them is kept for Warning events.")
	shared := sharedFlags{
		operatorNamespace: fs.String("operator-namespace", os.Getenv("POD_NAMESPACE"),
			"The operator's own namespace, which NSScalers never park and where the RebootPolicy fingerprint key Secret lives (default $POD_NAMESPACE)."),
		eventBudget: sync.OnceValues(func() (*status.EventBudget, error) {
			return newEventBudget(*eventQPS, *eventBurst, crmetrics.Registry)
		}),
	}
	// +runbook:controllers
	registerRebootPolicy(reg, scheme, fs, shared)
	registerNSScaler(reg, scheme, fs, shared)
	registerMemcached(reg, scheme, fs, shared)
}

// newEventBudget is the budget of --event-qps and --event-burst, its
// counter registered with reg; nil (no bound) for a negative qps.
func newEventBudget(qps float64, burst int, reg prometheus.Registerer) (*status.EventBudget, error) {
	if qps < 0 {
		return nil, nil
	}
	if qps == 0 || burst < 1 {
		return nil, fmt.Errorf("--event-qps=%v --event-burst=%d: both must be positive (a negative --event-qps lifts the bound)", qps, burst)
	}
	b := status.NewEventBudget(qps, burst, clock.RealClock{}, ctrl.Log.WithName("events"))
	if err := b.Register(reg); err != nil {
		return nil, err
	}
	return b, nil
}
