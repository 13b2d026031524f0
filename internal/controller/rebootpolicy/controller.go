// Package rebootpolicy is the RebootPolicy controller: per-policy probe
// workers turn probes, SQL results and watched objects into triggers, and
// the reconciler restarts the target like `kubectl rollout restart`.
package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/alerts"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/notify"
	"github.com/runbook-dev/runbook/internal/probe"
)

// Name names the controller, its flags, logs and event reporter.
const Name = "rebootpolicy"

// FieldManager owns the restart annotations on targets and the status
// (a constant so that it can never change).
const FieldManager = status.FieldOwnerPrefix + Name

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
	// once (DefaultMaxConcurrentReconciles when not positive).
	MaxConcurrentReconciles int
	// Throttle bounds the restarts in progress (manager-wide and per
	// policy); References wakes referenced triggers; Notifier sends webhook
	// messages. Setup fills them; nil Notifier sends nothing.
	Throttle   *Throttle
	References *probe.RefWatcher
	Notifier   *notify.Notifier
	// Rollouts reads Argo Rollouts' Rollouts (nil: the kind counts as not
	// served).
	Rollouts *argoRollouts
	// Alerts answers which alerts fire per namespace (nil: no
	// --prometheus-url).
	Alerts *alerts.Watcher
	// requests remembers the last refused (too long) restart request per
	// RebootPolicy, so that it is reported once.
	requests *requestLog
	// admission serialises the namespace limit's decisions per namespace.
	admission namespaceLocks
}

// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=argoproj.io,resources=rollouts,verbs=get;list;watch;patch
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
// went through). That rule is why this controller, unlike the other two,
// may write status twice in a pass: the fire, then the outcome. The events
// of the pass are recorded once, at its end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, err := r.begin(ctx, req.NamespacedName)
	if p == nil || err != nil {
		return ctrl.Result{}, err
	}
	defer r.flushNotes(p)
	if p.rbp.Spec.Suspend {
		res, err := r.suspend(ctx, p)
		return res, status.InPhase("suspend", err)
	}
	if err := r.syncWorkers(ctx, p); err != nil {
		return ctrl.Result{}, status.InPhase("workers", err)
	}
	r.takeRestartRequest(p)
	if done, err := r.observeTargets(ctx, p); done || err != nil {
		if err == nil {
			res, err := r.persist(ctx, p)
			if err == nil && res.RequeueAfter == 0 {
				res.RequeueAfter = p.recheck
			}
			return res, status.InPhase("status", err)
		}
		return ctrl.Result{}, status.InPhase("targets", err)
	}
	if res, err := r.persistFire(ctx, p); err != nil || res.RequeueAfter > 0 {
		return res, status.InPhase("fire", err)
	}
	res, err := r.restartPending(ctx, p)
	return res, status.InPhase("restart", err)
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
	// gate: the transitions of the halt and approval gates (gate.go).
	gate gateNotes
	// events are the pass's events, recorded once when it ends
	// (flushNotes), after its status writes.
	events *status.Batch
	// recheck: look again after this long (the target kind is not served).
	recheck time.Duration
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
		r.Metrics.forgetGates(nn)
		r.dropAlerts(nn)
		r.Throttle.alarmAt(nn, time.Time{})
		r.requests.forget(nn)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get rebootpolicy %s: %w", nn, err)
	}
	p := &pass{rbp: &rbp, persisted: rbp.DeepCopy(), now: r.Clock.Now(), events: r.Events.Batch()}
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
	r.Metrics.forgetGates(nn)
	r.dropAlerts(nn)
	p.rbp.Status.BlockingAlerts = nil
	suspendPolicyStatuses(p.rbp.Status.Policies)
	r.takeRestartRequest(p)
	st := &p.rbp.Status
	st.RestartRequestPending, st.PendingRestarts, st.NextRestartTime = false, 0, nil
	p.setConditions(conditionInput{suspended: true})
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

func execRefused(refused map[string]refusal) bool {
	for _, rf := range refused {
		if rf.reason == autorebootv1alpha1.ReasonExecNotAllowed {
			return true
		}
	}
	return false
}
