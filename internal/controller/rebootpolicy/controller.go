// Package rebootpolicy is the RebootPolicy controller: per-policy probe
// workers turn probes, SQL results and watched objects into triggers, and
// the reconciler restarts the target like `kubectl rollout restart`.
package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/notify"
	"github.com/runbook-dev/runbook/internal/probe"
)

// Name names the controller, its flags, logs and event reporter.
const Name = "rebootpolicy"

// FieldManager owns the restart annotations on targets and the status
// (status.FieldOwner(Name); a constant so that it can never change).
const FieldManager = "runbook-" + Name

// defaultMinRestartInterval applies when spec.minRestartInterval is unset
// (the CRD default normally fills it in).
const defaultMinRestartInterval = time.Minute

// staleRetry is how soon a reconcile that met a stale copy runs again.
const staleRetry = time.Second

// errStaleCache: the target changed since the decision; nothing was written.
var errStaleCache = errors.New("target changed since it was read")

// blockedRecheck is how often a policy refused with ExecNotAllowed is
// checked again (the admin may add the script).
const blockedRecheck = time.Minute

// Reconciler reconciles RebootPolicies. Setup builds it; every dependency
// is a field.
type Reconciler struct {
	// Client reads RebootPolicies and targets from the cache and writes.
	Client  client.Client
	Status  *status.Writer
	Events  status.Events
	Clock   clock.Clock
	Workers *probe.Workers
	Metrics *Metrics
	// ExecProbeDir mirrors probe.Settings.ExecProbeDir, to refuse exec
	// probes up front with an ExecNotAllowed condition.
	ExecProbeDir string
	// Limits bound what one namespace's policies may run.
	Limits Limits
	// MaxConcurrentReconciles is how many RebootPolicies are reconciled at
	// once (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// Throttle bounds the restarts in progress (manager-wide and per
	// policy); References wakes referenced triggers; Notifier sends webhook
	// messages. Setup fills them; nil Notifier sends nothing.
	Throttle   *Throttle
	References *probe.RefWatcher
	Notifier   *notify.Notifier
	// requests remembers the last refused (too long) restart request per
	// RebootPolicy, so that it is reported once.
	requests *requestLog
	// admission serialises the namespace limit's decisions per namespace.
	admission namespaceLocks
}

// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get
// Referenced triggers watch ConfigMap metadata (never their data).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The network policy's live lookups (internal/egress): Service CIDRs,
// Services and pods by IP, the apiserver's EndpointSlices.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups="",resources=services;pods,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// Reconcile runs four phases: sync the workers (and copy their published
// transitions into status), observe the targets, persist a fresh fire, and
// restart for a pending trigger. One rule holds them together: a fire is
// persisted in status before any target is patched for it, so a leader
// that dies in between leaves a successor that neither fires again nor
// forgets the restart (the restart id on the target tells it the patch
// went through).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, err := r.begin(ctx, req.NamespacedName)
	if p == nil || err != nil {
		return ctrl.Result{}, err
	}
	defer r.flushNotes(p)
	if p.rbp.Spec.Suspend {
		return r.suspend(ctx, p)
	}
	if err := r.syncWorkers(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	r.takeRestartRequest(p)
	if done, err := r.observeTargets(ctx, p); done || err != nil {
		if err == nil {
			return r.persist(ctx, p)
		}
		return ctrl.Result{}, err
	}
	if res, err := r.persistFire(ctx, p); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	return r.restartPending(ctx, p)
}

// pass is the state of one reconcile.
type pass struct {
	rbp *autorebootv1alpha1.RebootPolicy
	// persisted is rbp as last read or written: what status patches are
	// computed against.
	persisted *autorebootv1alpha1.RebootPolicy
	now       time.Time
	// acks are worker fires merged into rbp but not yet in the persisted
	// status.
	acks []ack
	// fresh: a worker fired since the last persisted status.
	fresh   bool
	refused map[string]refusal
	targets []targetInfo
	in      conditionInput
	// pending: something waits for a restart (work); decision says what
	// to do about it.
	pending  bool
	work     pendingWork
	rules    restartRules
	decision restartDecision
	// requested: a restart request is taken in this pass (its event
	// follows the status write).
	requested bool
	// notes are the policy transitions' events, sent at the end of the
	// pass if written is set (a status write of the pass succeeded).
	notes   []policyNote
	written bool
	// restarts are the targets the pass restarted ("Deployment web
	// (health)"), for the policy's one Restarted event at its end.
	restarts []string
}

// begin reads the RebootPolicy (fresh if the cache may predate the
// controller's own last write) and prepares its status; nil when it is
// gone or going.
func (r *Reconciler) begin(ctx context.Context, nn types.NamespacedName) (*pass, error) {
	var rbp autorebootv1alpha1.RebootPolicy
	err := r.Client.Get(ctx, nn, &rbp)
	if err == nil {
		err = r.Status.Refresh(ctx, &rbp)
	}
	if apierrors.IsNotFound(err) || (err == nil && !rbp.DeletionTimestamp.IsZero()) {
		r.Workers.Remove(nn)
		r.Status.Forget(nn)
		r.Throttle.Withdraw(nn)
		r.Metrics.setPending(nn, 0)
		r.requests.forget(nn)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get rebootpolicy %s: %w", nn, err)
	}
	p := &pass{rbp: &rbp, persisted: rbp.DeepCopy(), now: r.Clock.Now()}
	rbp.Status.ObservedGeneration = rbp.Generation
	rbp.Status.Policies = alignPolicyStatuses(rbp.Spec.Policies, rbp.Status.Policies)
	return p, nil
}

// suspend stops the workers and forgets baselines and pending triggers;
// a restart request made meanwhile is taken and dropped.
func (r *Reconciler) suspend(ctx context.Context, p *pass) (ctrl.Result, error) {
	nn := client.ObjectKeyFromObject(p.rbp)
	r.Workers.Remove(nn)
	r.Throttle.Withdraw(nn)
	r.Metrics.setPending(nn, 0)
	suspendPolicyStatuses(p.rbp.Status.Policies)
	r.takeRestartRequest(p)
	st := &p.rbp.Status
	st.RestartRequestPending, st.PendingRestarts, st.NextRestartTime = false, 0, nil
	p.setConditions(conditionInput{suspended: true})
	return r.persist(ctx, p)
}

// syncWorkers makes the workers match the spec and copies what they
// published into status.
func (r *Reconciler) syncWorkers(ctx context.Context, p *pass) error {
	nn := client.ObjectKeyFromObject(p.rbp)
	refused, err := r.ensureWorkers(ctx, p.rbp)
	if err != nil {
		return err
	}
	p.refused = refused
	p.acks = r.mergeWorkerStates(p.rbp, r.Workers.Snapshot(nn), refused)
	p.fresh = len(p.acks) > 0
	p.notes = policyNotes(p.persisted, p.rbp)
	return nil
}

// ensureWorkers starts and stops rbp's workers as its admitted policies
// say. With a namespace limit, the decision and the workers it starts are
// one step under the namespace's admission lock (see admitLocked).
func (r *Reconciler) ensureWorkers(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy) (map[string]refusal, error) {
	nn := client.ObjectKeyFromObject(rbp)
	if r.Limits.MaxPerNamespace <= 0 {
		admitted, err := r.admitted(ctx, rbp)
		if err != nil {
			return nil, err
		}
		specs, refused := r.workerSpecs(rbp, admitted)
		r.Workers.Ensure(nn, specs)
		return refused, nil
	}
	// The slots are computed and applied under the namespace's admission
	// lock: a later decision always rests on a cache at least as new.
	// Applying stops every running worker of the namespace that the same
	// decision leaves without a slot (a policy admitted on a cache that
	// had not yet seen an older RebootPolicy gives its slot back as soon
	// as a reconcile sees that one) in the same step that starts rbp's:
	// the namespace's running workers never exceed the limit.
	unlock := r.admission.lock(rbp.Namespace)
	s, err := r.namespaceSlots(ctx, rbp.Namespace)
	if err != nil {
		unlock()
		return nil, err
	}
	specs, refused := r.workerSpecs(rbp, s.of(rbp))
	displaced := r.Workers.Admit(nn, s.has, specs)
	unlock()
	r.Workers.Requeue(slices.DeleteFunc(displaced, func(o types.NamespacedName) bool { return o == nn }))
	return refused, nil
}

// observeTargets reads the targets and decides about a pending trigger.
// done: the spec cannot be used (InvalidSpec is set); only a spec change
// helps, so nothing else happens.
func (r *Reconciler) observeTargets(ctx context.Context, p *pass) (done bool, err error) {
	targets, err := r.resolveTargets(ctx, p.rbp, p.now)
	var invalid *invalidSpecError
	if errors.As(err, &invalid) {
		p.setConditions(conditionInput{invalidSpec: invalid.msg})
		return true, nil
	}
	if err != nil {
		return false, err
	}
	p.targets, p.in = targets, targetConditions(targets)
	rules, err := restartRulesOf(p.rbp)
	if err != nil {
		p.setConditions(conditionInput{invalidSchedule: err.Error()})
		return true, nil
	}
	p.rules = rules
	p.work = pendingFromStatus(p.rbp)
	if p.pending = p.work.any(); p.pending {
		p.decision = decideRestart(targets, p.work, targetRestartIDs(p.rbp), p.now, rules)
		p.in.waiting, p.in.waitingReason = p.decision.waitReason, p.decision.condReason
	}
	p.setConditions(p.in)
	return false, nil
}

// restartRulesOf reads the spec's rules for acting on pending work; an
// unknown time zone is an error for the InvalidSchedule condition.
func restartRulesOf(rbp *autorebootv1alpha1.RebootPolicy) (restartRules, error) {
	windows, err := parseRestartSchedule(rbp.Spec.RestartSchedule)
	if err != nil {
		return restartRules{}, err
	}
	rules := restartRules{minInterval: minRestartInterval(rbp), windows: windows}
	if rbp.Spec.SettleDelay != nil {
		rules.settle = rbp.Spec.SettleDelay.Duration
	}
	if ro := rbp.Spec.Rollout; ro != nil && ro.MaxConcurrent != nil {
		rules.maxConcurrent = int(*ro.MaxConcurrent)
	}
	return rules, nil
}

// persistFire writes a fresh fire to status before any target is patched
// for it (see Reconcile).
func (r *Reconciler) persistFire(ctx context.Context, p *pass) (ctrl.Result, error) {
	if !p.fresh || len(p.decision.restart) == 0 {
		return ctrl.Result{}, nil
	}
	return r.persist(ctx, p)
}

// restartPending carries out the decision about a pending trigger and
// writes the outcome.
func (r *Reconciler) restartPending(ctx context.Context, p *pass) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var result ctrl.Result
	var recognised []string
	var restartErr error
	if p.pending {
		result, recognised, restartErr = r.handlePending(ctx, p)
		if errors.Is(restartErr, errStaleCache) {
			// Nothing was changed; decide again on fresh data.
			logger.V(1).Info("target changed since it was read, reconciling again")
			return result, nil
		}
		p.setConditions(p.in)
	}
	if res, err := r.persist(ctx, p); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if len(recognised) > 0 {
		// Logged once recorded: a reconcile on a stale copy comes to the
		// same conclusion but its status write is refused.
		logger.Info("restart for this trigger already done, recorded it", "targets", recognised)
	}
	if restartErr != nil {
		logger.Error(restartErr, "restart failed")
		return ctrl.Result{}, restartErr
	}
	if execRefused(p.refused) && (result.RequeueAfter == 0 || result.RequeueAfter > blockedRecheck) {
		// Nothing watches the script directory: look again later.
		result.RequeueAfter = blockedRecheck
	}
	return result, nil
}

// persist writes status when it changed, then acknowledges the fires it
// holds. A conflict means the copy was stale: the fires stay
// unacknowledged and are merged into a fresh copy on the retry.
func (r *Reconciler) persist(ctx context.Context, p *pass) (ctrl.Result, error) {
	if _, err := r.Status.Patch(ctx, p.persisted, p.rbp); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status conflict, reconciling again")
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
		return ctrl.Result{}, err
	}
	p.written = true
	nn := client.ObjectKeyFromObject(p.rbp)
	for _, a := range p.acks {
		r.Workers.Ack(nn, a.policy, a.hash, a.seq)
	}
	for _, ps := range p.rbp.Status.Policies {
		r.Workers.MarkPending(nn, ps.Name, ps.PendingTrigger)
	}
	p.acks = nil
	p.persisted = p.rbp.DeepCopy()
	if p.requested {
		// Once, when recorded: a conflict leaves it for the retry.
		p.requested = false
		r.Metrics.restartRequested()
		r.Events.Normal(p.rbp, nil, autorebootv1alpha1.EventRestartRequested, "Restart",
			"restart requested (%s): the targets are restarted within the windows and the throttle", p.rbp.Status.LastRestartRequest)
	}
	return ctrl.Result{}, nil
}

func (p *pass) setConditions(in conditionInput) {
	setConditions(&p.rbp.Status, p.rbp.Generation, p.now, in)
}

// targetConditions is what the conditions say about the targets.
func targetConditions(targets []targetInfo) conditionInput {
	in := conditionInput{targetsFound: len(targets) > 0}
	for _, t := range targets {
		if t.paused {
			in.paused = append(in.paused, t.obj.GetName())
		}
		if t.onDelete {
			in.onDelete = append(in.onDelete, t.obj.GetName())
		}
		if t.stampInFuture {
			in.futureStamps = append(in.futureStamps, string(t.kind)+" "+t.obj.GetName())
		}
	}
	return in
}

func execRefused(refused map[string]refusal) bool {
	for _, rf := range refused {
		if rf.reason == autorebootv1alpha1.ReasonExecNotAllowed {
			return true
		}
	}
	return false
}

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
	// MaxConcurrentReconciles (DefaultMaxConcurrentReconciles when 0).
	MaxConcurrentReconciles int
	// Throttle is the manager-wide limit of restarts in progress (built in
	// main, shared by every RebootPolicy); nil means no limit.
	Throttle *Throttle
	// Namespaces are the manager's --watch-namespaces (empty: all), which
	// the referenced triggers' ConfigMap watch follows.
	Namespaces []string
	// Notify bounds webhook notifications.
	Notify notify.Settings
}

// Setup builds the workers and the reconciler from mgr and opts and adds
// both to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Keys == nil {
		opts.Keys = fingerprint.NewSource(mgr.GetAPIReader(), mgr.GetClient(), opts.Probes.OperatorNamespace,
			opts.Probes.FingerprintKeySecret, mgr.GetLogger().WithName("fingerprint-key"))
	}
	cluster := egress.NewAPICluster(mgr.GetAPIReader(), mgr.GetConfig().Host, opts.Clock, mgr.GetLogger().WithName("egress"))
	network := egress.New(opts.Network, cluster)
	if opts.Metrics != nil {
		network = network.WithDeniedCounter(opts.Metrics.dialsDenied)
	}
	workers, refs, err := buildWorkers(mgr, opts, network)
	if err != nil {
		return nil, err
	}
	throttle, err := bindThrottle(mgr, opts)
	if err != nil {
		return nil, err
	}
	events := status.Events{Recorder: mgr.GetEventRecorder(status.ReporterName(Name))}
	notifier := notify.New(opts.Notify, mgr.GetAPIReader(), network, opts.Clock, events, opts.Metrics, mgr.GetLogger().WithName(Name+"-notify"))
	if err := mgr.Add(notifier); err != nil {
		return nil, fmt.Errorf("adding rebootpolicy notifier: %w", err)
	}
	r := &Reconciler{
		Client:                  mgr.GetClient(),
		Status:                  status.NewWriter(mgr.GetClient(), mgr.GetAPIReader(), FieldManager),
		Events:                  events,
		Clock:                   opts.Clock,
		Workers:                 workers,
		Metrics:                 opts.Metrics,
		ExecProbeDir:            opts.Probes.ExecProbeDir,
		Limits:                  opts.Limits,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Throttle:                throttle,
		References:              refs,
		Notifier:                notifier,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up rebootpolicy controller: %w", err)
	}
	return r, nil
}

// buildWorkers builds the probe workers and what referenced triggers
// learn changes from, and adds them to mgr.
func buildWorkers(mgr ctrl.Manager, opts Options, network *egress.Policy) (*probe.Workers, *probe.RefWatcher, error) {
	if opts.Probes.Referenced.WatchSecrets {
		if err := probe.CanWatchSecrets(mgr.GetAPIReader()); err != nil {
			return nil, nil, err
		}
	}
	refs, err := probe.NewRefWatcher(mgr, opts.Namespaces, opts.Probes.Referenced.WatchSecrets)
	if err != nil {
		return nil, nil, err
	}
	probers := probe.NewProbers(opts.Probes, mgr.GetAPIReader(), opts.Keys, network, opts.Clock).WithReferences(mgr.GetClient(), refs, workloads{})
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
		For(&autorebootv1alpha1.RebootPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, restartRequestChanged())))
	if r.Limits.MaxPerNamespace > 0 {
		b = b.Watches(&autorebootv1alpha1.RebootPolicy{}, handler.EnqueueRequestsFromMapFunc(r.policiesWaitingForSlots),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDeployment)), builder.WithPredicates(targetDecisionChanged())).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindStatefulSet)), builder.WithPredicates(targetDecisionChanged())).
		Watches(&appsv1.DaemonSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDaemonSet)), builder.WithPredicates(targetDecisionChanged())).
		WatchesRawSource(source.Channel(r.Workers.Events(), enqueueName())).
		WatchesRawSource(source.Channel(r.Throttle.Events(), enqueueName())).
		WithOptions(controller.Options{MaxConcurrentReconciles: positiveOr(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		Complete(shutdown.Quiet[reconcile.Request](r))
}

func enqueueName() handler.TypedEventHandler[types.NamespacedName, reconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, nn types.NamespacedName) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: nn}}
	})
}

func positiveOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
