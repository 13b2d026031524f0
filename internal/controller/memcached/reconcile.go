// Package memcached holds the Memcached controller: it runs a memcached cache as
// a Deployment, a headless Service and a PodDisruptionBudget owned by the
// Memcached object, applies them with server-side apply, and reports the
// instances' real readiness and endpoints in the status.
package memcached

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// DefaultFieldManager is the server-side apply field manager of the
// controller: the managedFields entry that records what it owns.
const DefaultFieldManager = "runbook-memcached"

// serviceMonitorRecheck is how often a Memcached that wants a ServiceMonitor
// the cluster cannot serve looks for the kind again.
const serviceMonitorRecheck = 10 * time.Minute

// Event reasons.
const (
	EventCreated        = "Created"
	EventScaled         = "Scaled"
	EventConfigRollout  = "ConfigRollout"
	EventDriftCorrected = "DriftCorrected"
	EventDeleted        = "Deleted"
	EventForeignObject  = "ForeignObject"
	EventInvalidSpec    = "InvalidSpec"
)

// Reconciler reconciles Memcached objects. Every dependency is a field set
// by the caller (cmd/controllers.go or a test).
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// Recorder emits events on the Memcached objects.
	Recorder events.EventRecorder
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
	// FieldManager is the server-side apply manager (DefaultFieldManager
	// when empty).
	FieldManager string
	// MaxConcurrentReconciles is the number of Memcached objects reconciled
	// in parallel (1 when 0).
	MaxConcurrentReconciles int
}

func (r *Reconciler) fieldManager() string {
	if r.FieldManager == "" {
		return DefaultFieldManager
	}
	return r.FieldManager
}

// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the owned objects of one Memcached match its spec and
// writes its status, each only when something differs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned objects.
		return ctrl.Result{}, nil
	}
	s, invalid := resolveSettings(&mc.Spec)
	obs := r.reconcileObjects(ctx, mc, s, invalid)
	r.reportCreated(mc, &obs)
	if err := r.writeStatus(ctx, mc, s.Size, obs); err != nil {
		return ctrl.Result{}, errors.Join(obs.applyErr, err)
	}
	if obs.applyErr != nil {
		return ctrl.Result{}, fmt.Errorf("reconciling Memcached %s: %w", req.NamespacedName, obs.applyErr)
	}
	if obs.serviceMonitorUnsupported {
		// Nothing announces that prometheus-operator got installed; look
		// again now and then (a read, no write when nothing changed).
		return ctrl.Result{RequeueAfter: serviceMonitorRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileObjects applies the Service, the Deployment, the PDB and the
// ServiceMonitor (unless the spec is invalid, then it only observes) and
// returns what it saw. The first apiserver error ends it.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, invalid error) observation {
	obs := observation{invalid: invalid}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	apply := invalid == nil

	svc, err := r.reconcileService(ctx, mc, s, apply, &obs)
	if err != nil {
		obs.applyErr = err
		return obs
	}
	if err := r.reconcileDeployment(ctx, mc, s, apply, &obs); err != nil {
		obs.applyErr = err
		return obs
	}

	if err := r.reconcilePDB(ctx, mc, s, apply, &obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling PodDisruptionBudget %s: %w", key, err)
		return obs
	}
	// ServiceMonitor, when prometheus-operator is installed.
	hadServiceMonitor := svc != nil && svc.Annotations[AnnotationServiceMonitor] == "true"
	if err := r.reconcileServiceMonitor(ctx, mc, s, apply, hadServiceMonitor, &obs); err != nil {
		obs.applyErr = fmt.Errorf("reconciling ServiceMonitor %s: %w", key, err)
	}
	return obs
}

// eventForApply records a creation (reported in one event per reconcile
// by reportCreated) or emits DriftCorrected for an update.
func (r *Reconciler) eventForApply(mc *cachev1alpha1.Memcached, obs *observation, kind string, created, applied bool) {
	switch {
	case !applied:
	case created:
		obs.created = append(obs.created, kind)
	default:
		r.event(mc, corev1.EventTypeNormal, EventDriftCorrected, "Update", "Restored the fields of %s %s that differ from the spec", kind, mc.Name)
	}
}

// reportCreated emits one Created event for everything created in this
// reconcile (an event is an apiserver write too).
func (r *Reconciler) reportCreated(mc *cachev1alpha1.Memcached, obs *observation) {
	if len(obs.created) == 0 {
		return
	}
	r.event(mc, corev1.EventTypeNormal, EventCreated, "Create", "Created %s (all named %s)", strings.Join(obs.created, ", "), mc.Name)
	obs.created = nil
}

func (r *Reconciler) event(mc *cachev1alpha1.Memcached, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(mc, nil, eventType, reason, action, note, args...)
	}
}

// writeStatus patches the status when, and only when, it differs from the
// stored one. Warning events go out on the transition into a problem, not on
// every reconcile.
func (r *Reconciler) writeStatus(ctx context.Context, mc *cachev1alpha1.Memcached, size int32, obs observation) error {
	st := computeStatus(mc, size, obs, r.Clock.Now())
	if equality.Semantic.DeepEqual(st, mc.Status) {
		return nil
	}
	before := findCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)
	after := findCondition(st.Conditions, cachev1alpha1.ConditionDegraded)
	if after != nil && after.Status == metav1.ConditionTrue && (before == nil || before.Reason != after.Reason || before.Status != after.Status) {
		switch after.Reason {
		case ReasonForeignObject:
			r.event(mc, corev1.EventTypeWarning, EventForeignObject, "Reconcile", "%s", after.Message)
		case ReasonInvalidSpec:
			r.event(mc, corev1.EventTypeWarning, EventInvalidSpec, "Reconcile", "%s", after.Message)
		}
	}
	orig := mc.DeepCopy()
	mc.Status = st
	if err := r.Client.Status().Patch(ctx, mc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patching status of Memcached %s/%s: %w", mc.Namespace, mc.Name, err)
	}
	log.FromContext(ctx).V(1).Info("status updated", "replicas", st.Replicas, "ready", st.ReadyReplicas, "servers", len(st.Servers))
	return nil
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// SetupWithManager registers the controller. Besides the Memcached objects
// it watches Deployments, Services and PodDisruptionBudgets by name (so a
// foreign object that goes away unblocks the Memcached of the same name),
// and the EndpointSlices of the owned Services (for status.servers).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	sameName := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.memcachedNamed(ctx, o.GetNamespace(), o.GetName())
	})
	slices := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		svc := o.GetLabels()[discoveryv1.LabelServiceName]
		if svc == "" || o.GetLabels()[labelManagedBy] != managedByValue {
			return nil
		}
		return r.memcachedNamed(ctx, o.GetNamespace(), svc)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&appsv1.Deployment{}, sameName).
		Watches(&corev1.Service{}, sameName).
		Watches(&policyv1.PodDisruptionBudget{}, sameName).
		Watches(&discoveryv1.EndpointSlice{}, slices).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named("memcached").
		Complete(r)
}

// memcachedNamed maps an object to the Memcached of the same name in its
// namespace, when there is one in the cache.
func (r *Reconciler) memcachedNamed(ctx context.Context, namespace, name string) []reconcile.Request {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if err := r.Client.Get(ctx, key, &cachev1alpha1.Memcached{}); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}
