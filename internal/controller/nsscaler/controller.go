// Package nsscaler holds the NSScaler controller: it parks (scales to zero or
// suspends) every workload of the namespaces an NSScaler selects, except a
// whitelist, and restores each to its recorded original.
package nsscaler

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// Name names the controller: its --controllers entry, its field manager,
// its event reporter (status.ReporterName) and its logs.
const Name = "nsscaler"

// FieldManager is the field manager of the workload patches, the
// finalizer and the status (a constant so that it can never change).
const FieldManager = status.FieldOwnerPrefix + Name

// kindRetryAfter is how soon a reconcile is retried while a custom-resource
// kind is not served (its CRD may be installed later; CRDs are not watched).
const kindRetryAfter = 30 * time.Second

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
	// argoCDNamespace: see Options.ArgoCDNamespace.
	argoCDNamespace string

	mu sync.Mutex
	// fights are each NSScaler's contested workloads.
	fights map[string]*fightTracker
	// dryRunEvents is, per DryRun NSScaler, what its last WouldPark and
	// WouldRestore events said (they are recorded only when it changes).
	dryRunEvents map[string]string
}

// phase is one named step of a reconcile; its error is returned wrapped in
// its name (status.InPhase).
type phase struct {
	name string
	run  func(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) error
}

// Reconcile parks the targets of one NSScaler, restores what no longer
// belongs parked, and reports. It is idempotent and assumes nothing about
// earlier runs: the recorded originals on the workloads are the only memory.
// The observation is the reconcile's scope: the phases fill it, one status
// write reports it, and its events are recorded once at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	scaler, err := r.fetch(ctx, req.NamespacedName)
	if scaler == nil || err != nil {
		return ctrl.Result{}, err
	}
	if stop, err := r.handleFinalizer(ctx, scaler); stop || err != nil {
		return ctrl.Result{}, status.InPhase("finalizer", err)
	}
	obs := newObservation(scaler, r.clock.Now())
	obs.events = r.events.Batch()
	defer obs.events.Flush()
	for _, ph := range []phase{
		{"namespaces", r.decideNamespaces},
		{"workloads", r.actOnWorkloads},
		{"pods", r.countPods},
	} {
		if err := ph.run(ctx, scaler, obs); err != nil {
			return ctrl.Result{}, status.InPhase(ph.name, err)
		}
	}
	if obs.deleting && obs.everythingRestored() {
		log.FromContext(ctx).Info("restored every parked workload; releasing the NSScaler")
		return ctrl.Result{}, status.InPhase("release", r.release(ctx, scaler))
	}
	if err := r.writeStatus(ctx, scaler, obs); err != nil {
		return ctrl.Result{}, status.InPhase("status", err)
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

// actOnWorkloads parks and restores the workloads of the namespaces
// decided on (when the NSScaler acts; otherwise it counts what it would
// do), pausing the GitOps tools that would undo it around the writes.
func (r *Reconciler) actOnWorkloads(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) error {
	pass, err := r.newPass(scaler, obs)
	if err != nil {
		return err
	}
	handlers := r.handlers(ctx, scaler, obs)
	gitOps := r.newGitOpsPass(scaler, obs)
	if gitOps != nil {
		r.pauseGitOps(ctx, scaler, gitOps, handlers)
	}
	r.reconcileWorkloads(ctx, scaler, handlers, pass)
	if gitOps != nil {
		r.resumeGitOps(ctx, scaler, gitOps)
		r.emitGitOpsEvents(scaler, obs.events, &obs.gitOps)
	}
	return nil
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
