package nsscaler

import (
	"cmp"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/internal/controller/status"
)

// Defaults of Options.
const (
	// DefaultWriteConcurrency is how many workload writes are in flight.
	DefaultWriteConcurrency = 16
	// DefaultMaxConcurrentReconciles: NSScalers interact through namespace
	// ownership, so one at a time unless the admin asks for more.
	DefaultMaxConcurrentReconciles = 1
)

// Options configure the NSScaler controller (built from flags in main).
type Options struct {
	// Clock is the time of schedules, wake entries, exclusions and
	// back-offs, stamps condition transitions and times the write passes;
	// the reconciles at transitions are timers on it. Nil is the real clock.
	Clock clock.WithDelayedExecution
	// Metrics are required (NewMetrics).
	Metrics *Metrics
	// OperatorNamespace is never parked (nor are kube-system, kube-public
	// and kube-node-lease).
	OperatorNamespace string
	// ProtectedNamespaces are globs (path.Match: *, ?, [a-z]) of namespaces
	// never parked either (--nsscaler-protected-namespaces).
	ProtectedNamespaces []string
	// Fights says when a workload someone keeps scaling up is left alone
	// (zero fields: the defaults).
	Fights FightPolicy
	// WriteConcurrency bounds the workload writes in flight (default 16).
	WriteConcurrency int
	// WriteQPS, when positive, also caps the workload writes per second
	// (a gentler park of thousands of workloads on a busy apiserver).
	WriteQPS float64
	// MaxConcurrentReconciles is how many NSScalers are reconciled at once
	// (default 1: NSScalers interact through namespace ownership).
	MaxConcurrentReconciles int
	// ArgoCDNamespace is where Argo CD keeps the Applications its tracking
	// names without a namespace (default DefaultArgoCDNamespace).
	ArgoCDNamespace string
	// Cache holds namespaces, workloads (including custom kinds) and pod
	// metadata. Nil (the normal case) builds the controller's own trimmed
	// cache (see newWorkloadCache); tests may pass the manager's.
	Cache cache.Cache
	// EventBudget is the manager-wide bound on events (built in main,
	// shared by every controller); nil bounds nothing.
	EventBudget *status.EventBudget
}

// withDefaults fills in what opts leave at zero; Metrics are required.
func (o Options) withDefaults() (Options, error) {
	if o.Metrics == nil {
		return o, fmt.Errorf("nsscaler: Options.Metrics must be set (build them with NewMetrics)")
	}
	o.Clock = cmp.Or[clock.WithDelayedExecution](o.Clock, clock.RealClock{})
	o.MaxConcurrentReconciles = status.PositiveOr(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	o.WriteConcurrency = status.PositiveOr(o.WriteConcurrency, DefaultWriteConcurrency)
	o.ArgoCDNamespace = cmp.Or(o.ArgoCDNamespace, DefaultArgoCDNamespace)
	return o, nil
}

// statusWriter writes an NSScaler's status (status.Writer).
type statusWriter interface {
	Update(ctx context.Context, obj client.Object, compute func() error) (bool, error)
	Forget(key types.NamespacedName)
}

// dependencies are what the Reconciler talks to; Setup takes them from the
// manager, unit tests from fakes.
type dependencies struct {
	// client reads NSScalers from the manager's cache and patches their
	// finalizer.
	client client.Client
	// access reads workloads, namespaces and pod metadata (cache), fresh
	// copies (apiserver) and patches workloads.
	access workloadAccess
	status statusWriter
	events status.Events
}

func newReconciler(d dependencies, opts Options) (*Reconciler, error) {
	protection, err := NewProtection(opts.OperatorNamespace, opts.ProtectedNamespaces)
	if err != nil {
		return nil, err
	}
	if opts.Clock != nil {
		opts.Metrics.saved.setClock(opts.Clock)
	}
	return &Reconciler{
		client: d.client, cache: d.access.cache, apiReader: d.access.apiReader, status: d.status, events: d.events,
		clock: opts.Clock, metrics: opts.Metrics, writeConcurrency: opts.WriteConcurrency,
		protection:  protection,
		tracker:     newWriteTracker(opts.Metrics.WritesAwaitingCache),
		builtins:    []kindHandler{newDeploymentHandler(d.access), newStatefulSetHandler(d.access), newCronJobHandler(d.access)},
		fightPolicy: opts.Fights.withDefaults(),
		wakeups:     newWakeups(opts.Clock),
		fights:      map[string]*fightTracker{}, dryRunEvents: map[string]string{},
		argoCDNamespace: opts.ArgoCDNamespace,
	}, nil
}

// Setup builds the NSScaler controller from mgr and opts and adds it (and
// its workload cache) to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	workloads, err := newWorkloadClient(mgr, opts.WriteQPS)
	if err != nil {
		return nil, err
	}
	// The cache's watch error handler reports to the run-time kinds, which
	// exist only once the controller is built.
	var dynamic *dynamicKinds
	if opts.Cache == nil {
		onWatchError := func(typeDescription string, err error) {
			if dynamic != nil {
				dynamic.watchFailed(typeDescription, err)
			}
		}
		if opts.Cache, err = newWorkloadCache(mgr, onWatchError); err != nil {
			return nil, err
		}
	}
	access := workloadAccess{cache: opts.Cache, apiReader: mgr.GetAPIReader(), patcher: newWorkloadPatcher(workloads), informers: opts.Cache}
	reporting := status.NewReporting(mgr, Name, opts.EventBudget)
	r, err := newReconciler(dependencies{
		client: mgr.GetClient(), access: access, status: reporting.Status, events: reporting.Events,
	}, opts)
	if err != nil {
		return nil, err
	}
	c, err := r.build(mgr, opts.Cache, opts.MaxConcurrentReconciles)
	if err != nil {
		return nil, err
	}
	if err := r.watchGitOps(mgr, c); err != nil {
		return nil, err
	}
	if err := mgr.Add(r.wakeups); err != nil {
		return nil, fmt.Errorf("adding the nsscaler wake-ups: %w", err)
	}
	if err := r.setupWakeRequests(mgr, opts.Cache); err != nil {
		return nil, err
	}
	dynamic = &dynamicKinds{
		mapper: mgr.GetRESTMapper(), access: access, cache: opts.Cache, clock: opts.Clock,
		watch:   func(inf cache.Informer) error { return c.Watch(r.informerSource(inf)) },
		resolve: resolveDynamicKind(access), changed: r.nudgeAll, kinds: map[KindKey]*dynamicKind{},
	}
	r.dynamic = dynamic
	return r, nil
}
