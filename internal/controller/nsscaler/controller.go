// Package nsscaler holds the NSScaler controller: it parks (scales to zero or
// suspends) every workload of the namespaces an NSScaler selects, except a
// whitelist, and restores each to its recorded original.
package nsscaler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// Name names the controller: its --controllers entry, its field manager
// (status.FieldOwner), its event reporter (status.ReporterName) and its logs.
const Name = "nsscaler"

// kindRetryAfter is how soon a reconcile is retried while a custom-resource
// kind is not served (its CRD may be installed later; CRDs are not watched).
const kindRetryAfter = 30 * time.Second

// Defaults of Options.
const (
	defaultWriteConcurrency = 16
	// NSScalers interact through namespace ownership: one at a time unless
	// the admin asks for more.
	defaultMaxConcurrentReconciles = 1
)

// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers/status,verbs=get;patch
// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds/scale,verbs=get;patch
// +kubebuilder:rbac:groups=keda.sh,resources=scaledobjects,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

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
	// Cache holds namespaces, workloads (including custom kinds) and pod
	// metadata. Nil (the normal case) builds the controller's own trimmed
	// cache (see newWorkloadCache); tests may pass the manager's.
	Cache cache.Cache
}

func (o Options) withDefaults() (Options, error) {
	if o.Metrics == nil {
		return o, fmt.Errorf("nsscaler: Options.Metrics must be set (build them with NewMetrics)")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.WriteConcurrency <= 0 {
		o.WriteConcurrency = defaultWriteConcurrency
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = defaultMaxConcurrentReconciles
	}
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

// Reconciler reconciles NSScalers. Setup builds it.
type Reconciler struct {
	client           client.Client
	cache            client.Reader
	apiReader        client.Reader
	status           statusWriter
	events           status.Events
	clock            clock.WithDelayedExecution
	metrics          *Metrics
	protection       Protection
	writeConcurrency int
	tracker          *writeTracker
	builtins         []kindHandler
	fightPolicy      FightPolicy
	wakeups          *wakeups
	// dynamic resolves and watches run-time kinds (set by Setup).
	dynamic *dynamicKinds

	mu sync.Mutex
	// fights are each NSScaler's contested workloads.
	fights map[string]*fightTracker
	// dryRunEvents is, per DryRun NSScaler, what its last WouldPark and
	// WouldRestore events said (they are recorded only when it changes).
	dryRunEvents map[string]string
}

func newReconciler(d dependencies, opts Options) (*Reconciler, error) {
	protection, err := NewProtection(opts.OperatorNamespace, opts.ProtectedNamespaces)
	if err != nil {
		return nil, err
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
	r, err := newReconciler(dependencies{
		client: mgr.GetClient(), access: access,
		status: status.NewWriter(mgr.GetClient(), mgr.GetAPIReader(), status.FieldOwner(Name)),
		events: status.Events{Recorder: mgr.GetEventRecorder(status.ReporterName(Name))},
	}, opts)
	if err != nil {
		return nil, err
	}
	c, err := r.build(mgr, opts.Cache, opts.MaxConcurrentReconciles)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(r.wakeups); err != nil {
		return nil, fmt.Errorf("adding the nsscaler wake-ups: %w", err)
	}
	dynamic = &dynamicKinds{
		mapper: mgr.GetRESTMapper(), access: access, cache: opts.Cache, clock: opts.Clock,
		watch:   func(inf cache.Informer) error { return c.Watch(r.informerSource(inf)) },
		resolve: resolveDynamicKind(access), changed: r.nudgeAll, kinds: map[KindKey]*dynamicKind{},
	}
	r.dynamic = dynamic
	return r, nil
}

// Reconcile parks the targets of one NSScaler, restores what no longer
// belongs parked, and reports. It is idempotent and assumes nothing about
// earlier runs: the recorded originals on the workloads are the only memory.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	scaler, err := r.fetch(ctx, req.NamespacedName)
	if scaler == nil || err != nil {
		return ctrl.Result{}, err
	}
	if stop, err := r.handleFinalizer(ctx, scaler); stop || err != nil {
		return ctrl.Result{}, err
	}
	obs, err := r.observeAndAct(ctx, scaler)
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.deleting && obs.everythingRestored() {
		log.FromContext(ctx).Info("restored every parked workload; releasing the NSScaler")
		return ctrl.Result{}, r.release(ctx, scaler)
	}
	if err := r.writeStatus(ctx, scaler, obs); err != nil {
		return ctrl.Result{}, err
	}
	r.wakeups.set(scaler.Name, obs.wakeup)
	return obs.result()
}

// fetch reads the NSScaler from the cache; nil when it is gone (what the
// controller kept about it is dropped).
func (r *Reconciler) fetch(ctx context.Context, key types.NamespacedName) (*scalingv1alpha1.NSScaler, error) {
	var scaler scalingv1alpha1.NSScaler
	if err := r.client.Get(ctx, key, &scaler); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
			return nil, nil
		}
		return nil, fmt.Errorf("reading NSScaler %s: %w", key.Name, err)
	}
	return &scaler, nil
}

// forget drops the metric series and the status writer's memory of a
// deleted (or released) NSScaler.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.metrics.forget(key.Name)
	r.status.Forget(key)
	r.wakeups.set(key.Name, time.Time{})
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.fights, key.Name)
	delete(r.dryRunEvents, key.Name)
}

// fightsOf is the NSScaler's memory of contested workloads.
func (r *Reconciler) fightsOf(name string) *fightTracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.fights[name]
	if !ok {
		t = newFightTracker(r.fightPolicy)
		r.fights[name] = t
	}
	return t
}

// observeAndAct plans the namespaces, parks and restores the workloads (when
// the NSScaler acts) and counts what remains: everything the status says.
func (r *Reconciler) observeAndAct(ctx context.Context, scaler *scalingv1alpha1.NSScaler) (*observation, error) {
	obs := newObservation(scaler, r.clock.Now())
	plan, err := r.plan(ctx, scaler)
	if err != nil {
		var invalid *invalidSelectorError
		if !errors.As(err, &invalid) {
			return nil, err
		}
		obs.planErr = err // selects nothing; what it parked is restored
	}
	plan = plan.awake(obs.moment.asleep(), obs.moment.wokenSet())
	if obs.deleting {
		plan = releaseAll(plan)
	}
	plan.ParkedReplicas = scaler.Spec.ParkedReplicas
	obs.plan = plan
	obs.nextTransition = obs.moment.nextTransition(obs.now, plan)
	obs.wakeAt(obs.nextTransition)
	obs.wakeAt(obs.moment.nextChange(obs.now))
	for _, until := range obs.moment.wakeUntils() {
		obs.wakeAt(until)
	}
	pass, err := r.newPass(scaler, obs)
	if err != nil {
		return nil, err
	}
	r.reconcileWorkloads(ctx, scaler, r.handlers(ctx, scaler, obs), pass)
	if err := r.countPods(ctx, plan, obs); err != nil {
		return nil, err
	}
	return obs, nil
}

// newPass prepares the workload half of a reconcile.
func (r *Reconciler) newPass(scaler *scalingv1alpha1.NSScaler, obs *observation) (*workloadPass, error) {
	p := &workloadPass{
		self: scaler.Name, plan: obs.plan, kinds: kindsOf(scaler.Spec), act: obs.acts(), dryRun: obs.dryRun && !obs.deleting,
		now: obs.now, fights: r.fightsOf(scaler.Name), obs: obs, parkedKinds: sets.New[KindKey](),
		targets: map[types.UID]struct{}{}, dryTallies: map[string]*namespaceTally{},
		grace: obs.gracePeriod,
	}
	p.parkedReplicasChanged = p.fights.parkedReplicasChanged(obs.plan.ParkedReplicas)
	if sel := scaler.Spec.ExcludeSelector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			// The CRD validates the selector; an apiserver without the
			// validation gets the error back here.
			return nil, fmt.Errorf("excludeSelector: %w", err)
		}
		p.excludeSelector = s
	}
	return p, nil
}

type invalidSelectorError struct{ err error }

func (e *invalidSelectorError) Error() string { return e.err.Error() }
func (e *invalidSelectorError) Unwrap() error { return e.err }

// plan reads every NSScaler and namespace from the cache and plans.
func (r *Reconciler) plan(ctx context.Context, scaler *scalingv1alpha1.NSScaler) (Plan, error) {
	var scalers scalingv1alpha1.NSScalerList
	if err := r.client.List(ctx, &scalers); err != nil {
		return Plan{}, fmt.Errorf("listing NSScalers: %w", err)
	}
	var nsList corev1.NamespaceList
	if err := r.cache.List(ctx, &nsList, client.UnsafeDisableDeepCopy); err != nil {
		return Plan{}, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]Namespace, 0, len(nsList.Items))
	for i := range nsList.Items {
		namespaces = append(namespaces, Namespace{Name: nsList.Items[i].Name, Labels: nsList.Items[i].Labels})
	}
	plan, err := PlanNamespaces(scaler, scalers.Items, namespaces, r.protection)
	if err != nil {
		return plan, &invalidSelectorError{err: err}
	}
	return plan, nil
}

// releaseAll turns a plan into the one of a departing NSScaler: every
// namespace it owns is restored, none parked.
func releaseAll(p Plan) Plan {
	return Plan{
		Parked:    sets.New[string](),
		Active:    p.Parked.Union(p.Active),
		Conflicts: p.Conflicts,
		Foreign:   p.Foreign,
		Protected: p.Protected,
	}
}

// kindsOf is the set of kinds the spec parks.
func kindsOf(spec scalingv1alpha1.NSScalerSpec) sets.Set[KindKey] {
	kinds := sets.New[KindKey]()
	for _, k := range spec.Kinds {
		kinds.Insert(kindKeyOf(k))
	}
	return kinds
}

// handlers returns the built-in handlers and those of the custom-resource
// kinds in the spec or still parked; kinds that are not available are
// reported in obs.
func (r *Reconciler) handlers(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) []kindHandler {
	hs := slices.Clone(r.builtins)
	custom := sets.New[KindKey]()
	for _, k := range scaler.Spec.Kinds {
		if k.Group != "" {
			custom.Insert(kindKeyOf(k))
		}
	}
	obs.previouslyParked = sets.New[KindKey]()
	for _, k := range scaler.Status.ParkedKinds {
		custom.Insert(kindKeyOf(k))
		obs.previouslyParked.Insert(kindKeyOf(k))
	}
	if r.dynamic == nil {
		return hs
	}
	// KEDA ScaledObjects, where they are served: the workloads they
	// autoscale are parked through them.
	custom.Insert(kindScaledObject)
	keys := custom.UnsortedList()
	slices.SortFunc(keys, func(a, b KindKey) int { return cmp.Compare(a.String(), b.String()) })
	for _, k := range keys {
		h, err := r.dynamic.handler(ctx, k)
		switch {
		case err == nil:
			hs = append(hs, h)
		case k == kindScaledObject && meta.IsNoMatchError(err) && !obs.previouslyParked.Has(k):
			// KEDA is not installed: nothing to do, nothing to report.
		case k == kindScaledObject && errors.Is(err, errNotSynced):
			// Until the ScaledObjects are known, a park could scale a
			// workload KEDA owns; the sync's end reconciles again.
			obs.kindUnhandled(k, err)
			obs.holdParks = true
		default:
			obs.kindUnhandled(k, err)
		}
	}
	return hs
}

// nudgeAll queues every NSScaler (a run-time kind became available or
// failed).
func (r *Reconciler) nudgeAll() {
	var l scalingv1alpha1.NSScalerList
	if err := r.client.List(context.Background(), &l, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range l.Items {
		r.wakeups.nudge(l.Items[i].Name)
	}
}

// countPods counts the pods (from the metadata cache) in parked namespaces.
func (r *Reconciler) countPods(ctx context.Context, plan Plan, obs *observation) error {
	for _, ns := range sets.List(plan.Parked) {
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := r.cache.List(ctx, pods, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		obs.podsRemaining += int32(len(pods.Items))
	}
	return nil
}

// workloadRef names a workload in errors and events.
func workloadRef(w Workload) string {
	return fmt.Sprintf("%s %s", w.Kind, types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
}
