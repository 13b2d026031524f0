// Package rebootpolicy is the RebootPolicy controller: per-policy probe
// workers turn probes, SQL results and watched objects into triggers, and
// the reconciler restarts the target like `kubectl rollout restart`.
package rebootpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/netpolicy"
)

// Event reasons.
const (
	EventRestarted      = "Restarted"
	EventRestartSkipped = "RestartSkipped"
	EventRestartFailed  = "RestartFailed"
	EventProbeFailed    = "ProbeFailed"
	EventTriggered      = "Triggered"
)

// defaultMinRestartInterval applies when spec.minRestartInterval is unset
// (the CRD default normally fills it in).
const defaultMinRestartInterval = time.Minute

// staleRetry is how soon a reconcile that met a stale cache runs again
// (the informer usually catches up within it).
const staleRetry = time.Second

// errStaleCache: the cache is behind the apiserver; nothing was written.
var errStaleCache = errors.New("cache is behind the apiserver")

// blockedRecheck is how often a policy refused with ExecNotAllowed is
// checked again (the admin may add the script).
const blockedRecheck = time.Minute

// Reconciler reconciles RebootPolicies. Every dependency is set in main.
type Reconciler struct {
	// Client reads RebootPolicies and targets from the cache and writes.
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.Clock
	Workers  *Workers
	Metrics  *Metrics
	// ExecProbeDir mirrors ProbeSettings.ExecProbeDir, to refuse exec
	// probes up front with an ExecNotAllowed condition.
	ExecProbeDir string
	// Limits bound what one namespace's policies may run.
	Limits Limits
}

// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The network policy's live lookups (internal/netpolicy): Service CIDRs,
// Services and pods by IP, the apiserver's EndpointSlices.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups="",resources=services;pods,verbs=list
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// Reconcile makes the workers match the spec, copies their transitions
// into status and restarts the target for pending triggers.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var rbp autorebootv1alpha1.RebootPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &rbp); err != nil {
		if apierrors.IsNotFound(err) {
			r.Workers.Remove(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get rebootpolicy %s: %w", req.NamespacedName, err)
	}
	if !rbp.DeletionTimestamp.IsZero() {
		r.Workers.Remove(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	orig := rbp.DeepCopy()
	now := r.Clock.Now()
	st := &rbp.Status
	st.ObservedGeneration = rbp.Generation
	st.Policies = alignPolicyStatuses(rbp.Spec.Policies, st.Policies)

	if rbp.Spec.Suspend {
		r.Workers.Remove(req.NamespacedName)
		suspendPolicyStatuses(st.Policies)
		setConditions(st, rbp.Generation, conditionInput{suspended: true})
		return ctrl.Result{}, r.writeStatus(ctx, orig, &rbp)
	}

	specs, refused, err := r.workerSpecs(ctx, &rbp)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Workers.Ensure(req.NamespacedName, specs)
	acks := r.mergeWorkerStates(&rbp, r.Workers.Snapshot(req.NamespacedName), refused)
	r.emitPolicyEvents(orig, &rbp)

	targets, err := r.resolveTargets(ctx, &rbp, now)
	var invalid *invalidSpecError
	if errors.As(err, &invalid) {
		// Only a spec change can help: report it, no retry.
		setConditions(st, rbp.Generation, conditionInput{invalidSpec: invalid.msg})
		return r.persist(ctx, orig, &rbp, acks)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	in := observeTargets(targets)

	// A fresh fire is acted on only once status holds it (with the new
	// baseline fingerprint), so a leader that dies after patching the target
	// leaves a successor that neither fires again nor forgets the restart.
	fresh := len(acks) > 0
	var d restartDecision
	var pending bool
	var triggeredAt metav1.Time
	if triggeredAt, pending = pendingSince(st.Policies); pending {
		d = decideRestart(targets, restartID(&rbp), triggeredAt.Time, now, minRestartInterval(&rbp))
		in.waiting = d.waitReason
	}
	setConditions(st, rbp.Generation, in)
	if fresh && len(d.restart) > 0 {
		if res, err := r.persist(ctx, orig, &rbp, acks); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
		acks = nil
		orig = rbp.DeepCopy()
	}

	var result ctrl.Result
	var recognised []string
	var restartErr error
	if pending {
		result, recognised, restartErr = r.handlePending(ctx, &rbp, targets, d, triggeredAt.Time, now, fresh, &in)
		if errors.Is(restartErr, errStaleCache) {
			// Nothing was changed; no status write from stale data either.
			logger.V(1).Info("cache behind the apiserver, reconciling again")
			return result, nil
		}
		setConditions(st, rbp.Generation, in)
	}
	if res, err := r.persist(ctx, orig, &rbp, acks); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if len(recognised) > 0 {
		// Logged once recorded: a reconcile on a stale cached copy comes to
		// the same conclusion but its status write is refused.
		logger.Info("restart for this trigger already done, recorded it", "targets", recognised)
	}
	if restartErr != nil {
		logger.Error(restartErr, "restart failed")
		return ctrl.Result{}, restartErr
	}
	if execRefused(refused) && (result.RequeueAfter == 0 || result.RequeueAfter > blockedRecheck) {
		// Nothing watches the script directory: look again later.
		result.RequeueAfter = blockedRecheck
	}
	return result, nil
}

// observeTargets is what the conditions say about the targets.
func observeTargets(targets []targetInfo) conditionInput {
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

// persist writes status when it changed and then acknowledges the fires it
// holds. A conflict means the cached copy was stale: the fires stay
// unacknowledged and are merged into the fresh copy on the retry.
func (r *Reconciler) persist(ctx context.Context, orig, rbp *autorebootv1alpha1.RebootPolicy, acks []ack) (ctrl.Result, error) {
	if err := r.writeStatus(ctx, orig, rbp); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status conflict, reconciling again")
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
		return ctrl.Result{}, err
	}
	nn := client.ObjectKeyFromObject(rbp)
	for _, a := range acks {
		r.Workers.Ack(nn, a.policy, a.hash, a.seq)
	}
	return ctrl.Result{}, nil
}

// handlePending carries out the restart decision for a pending trigger.
// The trigger stays pending while a target cannot be restarted (paused,
// OnDelete, none found) and is acted on once it can.
func (r *Reconciler) handlePending(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy, targets []targetInfo,
	d restartDecision, triggeredAt, now time.Time, fresh bool, in *conditionInput) (ctrl.Result, []string, error) {
	logger := log.FromContext(ctx)
	st := &rbp.Status
	if len(targets) == 0 {
		if fresh {
			r.Recorder.Eventf(rbp, nil, corev1.EventTypeWarning, EventRestartSkipped, "Restart",
				"trigger fired but no %s matches the target: the restart waits for one", rbp.Spec.Target.Kind)
		}
		return ctrl.Result{}, nil, nil
	}
	if fresh {
		// Once per trigger: the condition keeps saying it afterwards.
		for _, t := range d.skipped {
			why := "is paused"
			if t.onDelete {
				why = "uses the OnDelete update strategy"
			}
			r.Recorder.Eventf(rbp, t.obj, corev1.EventTypeWarning, EventRestartSkipped, "Restart",
				"%s %s %s: not restarted until that changes", t.kind, t.obj.GetName(), why)
			r.Recorder.Eventf(t.obj, rbp, corev1.EventTypeWarning, EventRestartSkipped, "Restart",
				"RebootPolicy %s fired but this %s %s", rbp.Name, t.kind, why)
			r.Metrics.restart(string(t.kind), "skipped", 0)
		}
	}
	if d.wait > 0 {
		logger.V(1).Info("restart deferred", "reason", d.waitReason, "after", d.wait)
		return ctrl.Result{RequeueAfter: d.wait}, nil, nil
	}
	var recognised []string
	for _, t := range d.done {
		// Restarted for this very trigger by a reconcile (maybe of a leader
		// that has died since) whose status write was lost: count it once.
		if t.restartID == d.id && !t.restartedAt.IsZero() &&
			// Status times have whole seconds, the annotation finer ones.
			(st.LastRestartTime == nil || st.LastRestartTime.Time.Before(t.restartedAt.Truncate(time.Second))) {
			st.RestartCount++
			st.LastRestartTime = &metav1.Time{Time: t.restartedAt}
			recognised = append(recognised, string(t.kind)+"/"+t.obj.GetName())
		}
	}
	for _, t := range d.restart {
		if err := r.restartTarget(ctx, t, now, d.id); err != nil {
			if apierrors.IsConflict(err) {
				// Target changed since the cached read: decide again.
				return ctrl.Result{RequeueAfter: staleRetry}, nil, errStaleCache
			}
			r.Recorder.Eventf(rbp, t.obj, corev1.EventTypeWarning, EventRestartFailed, "Restart", "%v", err)
			r.Metrics.restart(string(t.kind), "failed", 0)
			in.restartFailed = err.Error()
			// Targets restarted so far carry the restart id; the retry
			// counts them as done.
			return ctrl.Result{}, nil, err
		}
		st.RestartCount++
		st.LastRestartTime = &metav1.Time{Time: now}
		r.Metrics.restart(string(t.kind), "restarted", now.Sub(triggeredAt))
		r.Recorder.Eventf(rbp, t.obj, corev1.EventTypeNormal, EventRestarted, "Restart",
			"restarted %s %s (%s)", t.kind, t.obj.GetName(), pendingPolicies(st.Policies))
		r.Recorder.Eventf(t.obj, rbp, corev1.EventTypeNormal, EventRestarted, "Restart",
			"restarted by RebootPolicy %s (%s)", rbp.Name, pendingPolicies(st.Policies))
		logger.Info("restarted target", "kind", t.kind, "target", t.obj.GetName(), "policies", pendingPolicies(st.Policies))
	}
	if len(d.skipped) == 0 {
		clearPending(st.Policies)
	}
	return ctrl.Result{}, recognised, nil
}

// workerSpecs computes the desired workers. Policies that may not run
// (invalid, below the minimum period, beyond the namespace's share, an exec
// script that is not allowed) are returned in refused and get no worker.
func (r *Reconciler) workerSpecs(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy) ([]workerSpec, map[string]refusal, error) {
	nn := client.ObjectKeyFromObject(rbp)
	byName := map[string]autorebootv1alpha1.PolicyStatus{}
	for _, ps := range rbp.Status.Policies {
		byName[ps.Name] = ps
	}
	admitted, err := r.admitted(ctx, rbp)
	if err != nil {
		return nil, nil, err
	}
	refused := map[string]refusal{}
	specs := make([]workerSpec, 0, len(rbp.Spec.Policies))
	for _, p := range rbp.Spec.Policies {
		if rf := r.refusal(p, admitted[p.Name]); rf != nil {
			refused[p.Name] = *rf
			continue
		}
		ps := byName[p.Name]
		specs = append(specs, workerSpec{
			Key:     workerKey{Object: nn, Policy: p.Name},
			Hash:    triggerHash(nn.Namespace, p.Trigger),
			Trigger: *p.Trigger.DeepCopy(),
			Baseline: policyState{
				Fingerprint: ps.Fingerprint, TriggerHash: ps.TriggerHash,
				LastResult: ps.LastResult, Reason: ps.Reason, Message: ps.Message,
			},
		})
	}
	return specs, refused, nil
}

// refusal says why policy p may not run, or nil.
func (r *Reconciler) refusal(p autorebootv1alpha1.Policy, admitted bool) *refusal {
	if rf := r.Limits.specRefusal(p); rf != nil {
		return rf
	}
	if !admitted {
		rf := tooManyProbes(r.Limits.MaxPerNamespace)
		return &rf
	}
	if p.Trigger.Probe != nil && p.Trigger.Probe.Exec != nil {
		script := ""
		if len(p.Trigger.Probe.Exec.Command) > 0 {
			script = p.Trigger.Probe.Exec.Command[0]
		}
		if _, err := resolveScript(r.ExecProbeDir, script); err != nil {
			return &refusal{autorebootv1alpha1.ReasonExecNotAllowed, err.Error()}
		}
	}
	return nil
}

// triggerHash identifies a trigger spec; workers restart when it changes.
func triggerHash(namespace string, t autorebootv1alpha1.Trigger) string {
	b, _ := json.Marshal(struct {
		NS string                     `json:"ns"`
		T  autorebootv1alpha1.Trigger `json:"t"`
	}{namespace, t})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func minRestartInterval(rbp *autorebootv1alpha1.RebootPolicy) time.Duration {
	if rbp.Spec.MinRestartInterval == nil {
		return defaultMinRestartInterval
	}
	return rbp.Spec.MinRestartInterval.Duration
}

// SetupWithManager registers the controller: RebootPolicies, their
// targets (to notice finished rollouts) and the workers' transitions.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &autorebootv1alpha1.RebootPolicy{}, targetIndex,
		func(o client.Object) []string { return targetIndexValue(o.(*autorebootv1alpha1.RebootPolicy)) }); err != nil {
		return fmt.Errorf("indexing rebootpolicies by target: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("rebootpolicy").
		For(&autorebootv1alpha1.RebootPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.Limits.MaxPerNamespace > 0 {
		b = b.Watches(&autorebootv1alpha1.RebootPolicy{}, handler.EnqueueRequestsFromMapFunc(r.policiesWaitingForSlots),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDeployment))).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindStatefulSet))).
		Watches(&appsv1.DaemonSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesForTarget(autorebootv1alpha1.KindDaemonSet))).
		WatchesRawSource(source.Channel(r.Workers.Events(),
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, nn types.NamespacedName) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: nn}}
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(r)
}

// Options configure the RebootPolicy controller (built from flags in main).
type Options struct {
	Probes ProbeSettings
	// Network is where probes and database connections may go (admin
	// flags); the cluster's own addresses are looked up live.
	Network netpolicy.Settings
	Limits  Limits
	Clock   clock.Clock
	Metrics *Metrics
	// Keys hands out the fingerprint key; nil makes Setup build one from
	// the manager's own namespace (Probes.OperatorNamespace).
	Keys *fingerprint.Source
}

// Setup builds the workers and the reconciler and adds both to mgr. It
// returns the workers so tests can observe them.
func Setup(mgr ctrl.Manager, opts Options) (*Workers, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Keys == nil {
		opts.Keys = fingerprint.NewSource(mgr.GetAPIReader(), mgr.GetClient(), opts.Probes.OperatorNamespace,
			opts.Probes.FingerprintKeySecret, mgr.GetLogger().WithName("fingerprint-key"))
	}
	cluster := netpolicy.NewAPICluster(mgr.GetAPIReader(), mgr.GetConfig().Host, opts.Clock, mgr.GetLogger().WithName("netpolicy"))
	network := netpolicy.New(opts.Network, cluster)
	if opts.Metrics != nil {
		network = network.WithDeniedCounter(opts.Metrics.dialsDenied)
	}
	workers := NewWorkers(opts.Clock, newProbers(opts.Probes, mgr.GetAPIReader(), opts.Keys, network, opts.Clock), opts.Metrics,
		mgr.GetLogger().WithName("rebootpolicy-workers"))
	if err := mgr.Add(workers); err != nil {
		return nil, fmt.Errorf("adding rebootpolicy workers: %w", err)
	}
	r := &Reconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("rebootpolicy-controller"),
		Clock:        opts.Clock,
		Workers:      workers,
		Metrics:      opts.Metrics,
		ExecProbeDir: opts.Probes.ExecProbeDir,
		Limits:       opts.Limits,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up rebootpolicy controller: %w", err)
	}
	return workers, nil
}
