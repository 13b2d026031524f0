package rebootpolicy

import (
	"cmp"
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/alerts"
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/notify"
	"github.com/runbook-dev/runbook/internal/probe"
)

// DefaultMaxConcurrentReconciles is how many RebootPolicies are reconciled
// at once unless the admin says otherwise. A restart is three writes in a
// row (the fire, the patch, the outcome), so a reconcile mostly waits on
// the apiserver, and the policies probing one dependency fire together
// when it fails: with a few reconciles at once the last of such a burst
// waits for the writes of all the others before its own (the change →
// restart benchmark, test/bench/RESULTS.md).
const DefaultMaxConcurrentReconciles = 32

// Options configure the RebootPolicy controller (built from flags in main).
type Options struct {
	Probes probe.Settings
	// Network is where probes and database connections may go (admin
	// flags); the cluster's own addresses are looked up live.
	Network egress.Settings
	Limits  Limits
	Clock   clock.Clock
	Metrics *Metrics
	// Keys hands out the fingerprint key; nil makes Setup build one from
	// the manager's own namespace (Probes.OperatorNamespace).
	Keys *fingerprint.Source
	// MaxConcurrentReconciles (DefaultMaxConcurrentReconciles when not
	// positive).
	MaxConcurrentReconciles int
	// Throttle is the manager-wide limit of restarts in progress (built in
	// main, shared by every RebootPolicy); nil means no limit.
	Throttle *Throttle
	// Namespaces are the manager's --watch-namespaces (empty: all), which
	// the referenced triggers' ConfigMap watch follows.
	Namespaces []string
	// Notify bounds webhook notifications.
	Notify notify.Settings
	// RolloutKindRecheck is how long a missing Rollout kind is believed
	// (DefaultRolloutKindRecheck when 0).
	RolloutKindRecheck time.Duration
	// Alerts is the admin's Prometheus for spec.blockingAlerts (no URL:
	// none).
	Alerts alerts.Settings
	// EventBudget is the manager-wide bound on events (built in main,
	// shared by every controller); nil bounds nothing.
	EventBudget *status.EventBudget
}

// withDefaults fills in what opts leave at zero.
func (o Options) withDefaults() (Options, error) {
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.RealClock{})
	o.MaxConcurrentReconciles = status.PositiveOr(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	o.RolloutKindRecheck = cmp.Or(o.RolloutKindRecheck, DefaultRolloutKindRecheck)
	return o, nil
}

// Setup builds the workers and the reconciler from mgr and opts and adds
// both to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Keys == nil {
		opts.Keys = fingerprint.NewManagerSource(mgr, opts.Probes.OperatorNamespace, opts.Probes.FingerprintKeySecret, mgr.GetLogger())
	}
	cluster := egress.NewAPICluster(mgr.GetAPIReader(), mgr.GetConfig().Host, opts.Clock, mgr.GetLogger().WithName("egress"))
	network := egress.New(opts.Network, cluster)
	if opts.Metrics != nil {
		network = network.WithDeniedCounter(opts.Metrics.dialsDenied)
	}
	rollouts := &argoRollouts{mapper: mgr.GetRESTMapper(), cache: mgr.GetCache(), clock: opts.Clock,
		recheck: opts.RolloutKindRecheck}
	workers, refs, err := buildWorkers(mgr, opts, network, rollouts)
	if err != nil {
		return nil, err
	}
	throttle, err := bindThrottle(mgr, opts)
	if err != nil {
		return nil, err
	}
	reporting := status.NewReporting(mgr, Name, opts.EventBudget)
	notifier := notify.New(opts.Notify, mgr.GetAPIReader(), network, opts.Clock, reporting.Events, opts.Metrics, mgr.GetLogger().WithName(Name+"-notify"))
	if err := mgr.Add(notifier); err != nil {
		return nil, fmt.Errorf("adding rebootpolicy notifier: %w", err)
	}
	r := &Reconciler{
		Client:                  mgr.GetClient(),
		Status:                  reporting.Status,
		Events:                  reporting.Events,
		Clock:                   opts.Clock,
		Workers:                 workers,
		Metrics:                 opts.Metrics,
		ExecProbeDir:            opts.Probes.ExecProbeDir,
		Limits:                  opts.Limits,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Throttle:                throttle,
		References:              refs,
		Notifier:                notifier,
		Rollouts:                rollouts,
	}
	rollouts.hook = r.hookRollouts
	if r.Alerts, err = setupAlerts(mgr, opts); err != nil {
		return nil, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up rebootpolicy controller: %w", err)
	}
	return r, nil
}

// buildWorkers builds the probe workers and what referenced triggers
// learn changes from, and adds them to mgr.
func buildWorkers(mgr ctrl.Manager, opts Options, network *egress.Policy, rollouts *argoRollouts) (*probe.Workers, *probe.RefWatcher, error) {
	if opts.Probes.Referenced.WatchSecrets {
		if err := probe.CanWatchSecrets(mgr.GetAPIReader()); err != nil {
			return nil, nil, err
		}
	}
	refs, err := probe.NewRefWatcher(mgr, opts.Namespaces, opts.Probes.Referenced.WatchSecrets)
	if err != nil {
		return nil, nil, err
	}
	probers := probe.NewProbers(opts.Probes, mgr.GetAPIReader(), opts.Keys, network, opts.Clock).WithReferences(routedReader{Reader: mgr.GetClient(), rollouts: rollouts}, refs, workloads{reader: mgr.GetCache()})
	workers := probe.NewWorkers(opts.Clock, probers, opts.Metrics, mgr.GetLogger().WithName(Name+"-workers"))
	if err := mgr.Add(workers); err != nil {
		return nil, nil, fmt.Errorf("adding rebootpolicy workers: %w", err)
	}
	return workers, refs, nil
}

// bindThrottle feeds the throttle (a fresh one without a manager-wide
// limit when main passed none) from the manager's workload informers.
func bindThrottle(mgr ctrl.Manager, opts Options) (*Throttle, error) {
	t := opts.Throttle
	if t == nil {
		t = NewThrottle(0, opts.Clock)
	}
	t.clock = opts.Clock
	if err := t.bind(context.Background(), mgr.GetCache(), opts.Metrics); err != nil {
		return nil, err
	}
	if err := mgr.Add(t); err != nil {
		return nil, fmt.Errorf("adding the restart throttle: %w", err)
	}
	return t, nil
}

// SetupWithManager registers the controller: RebootPolicies, their
// targets (to notice finished rollouts) and the workers' transitions.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &autorebootv1alpha1.RebootPolicy{}, targetIndex,
		func(o client.Object) []string { return targetIndexValue(o.(*autorebootv1alpha1.RebootPolicy)) }); err != nil {
		return fmt.Errorf("indexing rebootpolicies by target: %w", err)
	}
	if r.requests == nil {
		r.requests = newRequestLog()
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// A restart request is an annotation: it changes no generation.
		For(&autorebootv1alpha1.RebootPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, restartRequestChanged(), gateAnnotationsChanged())))
	if r.Limits.MaxPerNamespace > 0 {
		b = b.Watches(&autorebootv1alpha1.RebootPolicy{}, handler.EnqueueRequestsFromMapFunc(r.policiesWaitingForSlots),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Alerts != nil {
		b = b.WatchesRawSource(source.Channel(r.Alerts.Events(), enqueueName()))
	}
	return b.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDeployment)), builder.WithPredicates(targetDecisionChanged())).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindStatefulSet)), builder.WithPredicates(targetDecisionChanged())).
		Watches(&appsv1.DaemonSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDaemonSet)), builder.WithPredicates(targetDecisionChanged())).
		WatchesRawSource(source.Channel(r.Workers.Events(), enqueueName())).
		WatchesRawSource(source.Channel(r.Throttle.Events(), enqueueName())).
		WithOptions(controller.Options{MaxConcurrentReconciles: status.PositiveOr(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		Complete(shutdown.Quiet[reconcile.Request](r))
}

func enqueueName() handler.TypedEventHandler[types.NamespacedName, reconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, nn types.NamespacedName) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: nn}}
	})
}
