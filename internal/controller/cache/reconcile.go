// Package cache holds the Memcached controller: it runs a memcached cache as
// a Deployment, a headless Service and a PodDisruptionBudget owned by the
// Memcached object, applies them with server-side apply, and reports the
// instances' real readiness and endpoints in the status.
package cache

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
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

// reconcileObjects applies the Service, the Deployment and the PDB (unless
// the spec is invalid, then it only observes) and returns what it saw.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, invalid error) observation {
	obs := observation{invalid: invalid}
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	apply := invalid == nil

	// Service.
	svc := &corev1.Service{}
	switch err := r.Client.Get(ctx, key, svc); {
	case apierrors.IsNotFound(err):
		svc = nil
	case err != nil:
		obs.applyErr = fmt.Errorf("reading Service %s: %w", key, err)
		return obs
	}
	switch {
	case svc != nil && !metav1.IsControlledBy(svc, mc):
		obs.foreign = append(obs.foreign, "Service "+key.String())
	case apply:
		desired := desiredService(mc, s)
		if svc != nil {
			fixed, err := r.removeClashingPorts(ctx, svc, desired)
			if err != nil {
				obs.applyErr = fmt.Errorf("repairing ports of Service %s: %w", key, err)
				return obs
			}
			if fixed {
				r.event(mc, corev1.EventTypeNormal, EventDriftCorrected, "Update", "Removed ports of Service %s that reuse the names of its own ports", mc.Name)
			}
		}
		var owned *corev1ac.ServiceApplyConfiguration
		if svc != nil {
			var err error
			if owned, err = corev1ac.ExtractService(svc, r.fieldManager()); err != nil {
				obs.applyErr = fmt.Errorf("extracting owned fields of Service %s: %w", key, err)
				return obs
			}
		}
		applied, err := r.applyIfChanged(ctx, desired, owned)
		if err != nil {
			obs.applyErr = fmt.Errorf("applying Service %s: %w", key, err)
			return obs
		}
		r.eventForApply(mc, &obs, "Service", svc == nil, applied)
		obs.serviceName = mc.Name
	case svc != nil:
		obs.serviceName = mc.Name
	}
	if obs.serviceName != "" {
		servers, err := readyServers(ctx, r.Client, mc.Namespace, obs.serviceName)
		if err != nil {
			obs.applyErr = err
			return obs
		}
		obs.servers = servers
	}

	// Deployment.
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, key, dep); {
	case apierrors.IsNotFound(err):
		dep = nil
	case err != nil:
		obs.applyErr = fmt.Errorf("reading Deployment %s: %w", key, err)
		return obs
	}
	switch {
	case dep != nil && !metav1.IsControlledBy(dep, mc):
		obs.foreign = append(obs.foreign, "Deployment "+key.String())
	case apply:
		live, err := r.applyDeployment(ctx, mc, s, dep, &obs)
		if err != nil {
			obs.applyErr = fmt.Errorf("applying Deployment %s: %w", key, err)
			obs.deployment = dep
			return obs
		}
		obs.deployment = live
	default:
		obs.deployment = dep
	}

	// PodDisruptionBudget.
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

// applyDeployment applies the desired Deployment and returns the live
// object. The events tell creation, scaling and configuration rollouts
// apart, since each means something different to an operator.
func (r *Reconciler) applyDeployment(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *appsv1.Deployment, obs *observation) (*appsv1.Deployment, error) {
	desired, err := desiredDeployment(mc, s)
	if err != nil {
		return nil, err
	}
	var owned *appsv1ac.DeploymentApplyConfiguration
	if live != nil {
		if owned, err = appsv1ac.ExtractDeployment(live, r.fieldManager()); err != nil {
			return nil, fmt.Errorf("extracting owned fields: %w", err)
		}
	}
	applied, err := r.applyIfChanged(ctx, desired, owned)
	if err != nil || !applied {
		return live, err
	}
	// The apply response (the new live object) was decoded into desired.
	after, err := convertInto(desired, &appsv1.Deployment{})
	if err != nil {
		return nil, fmt.Errorf("decoding the apply response: %w", err)
	}
	switch {
	case live == nil:
		obs.created = append(obs.created, fmt.Sprintf("Deployment (%d instances)", s.Size))
		return after, nil
	case live.Spec.Replicas == nil || *live.Spec.Replicas != s.Size:
		from := int32(1)
		if live.Spec.Replicas != nil {
			from = *live.Spec.Replicas
		}
		r.event(mc, corev1.EventTypeNormal, EventScaled, "Scale", "Scaled Deployment %s from %d to %d instances", mc.Name, from, s.Size)
	}
	if oldHash := live.Spec.Template.Annotations[AnnotationConfigHash]; oldHash != configHash(s) {
		r.event(mc, corev1.EventTypeNormal, EventConfigRollout, "Rollout",
			"Rolling the instances of Deployment %s to configuration %s (was %q), one at a time", mc.Name, configHash(s), oldHash)
	} else if live.Spec.Replicas != nil && *live.Spec.Replicas == s.Size {
		r.event(mc, corev1.EventTypeNormal, EventDriftCorrected, "Update", "Restored the fields of Deployment %s that were changed outside the controller", mc.Name)
	}
	return after, nil
}

// reconcilePDB applies the PodDisruptionBudget when it is enabled and
// deletes the owned one when it is not.
func (r *Reconciler) reconcilePDB(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	pdb := &policyv1.PodDisruptionBudget{}
	switch err := r.Client.Get(ctx, key, pdb); {
	case apierrors.IsNotFound(err):
		pdb = nil
	case err != nil:
		return err
	}
	if pdb != nil && !metav1.IsControlledBy(pdb, mc) {
		if s.PDBEnabled {
			obs.foreign = append(obs.foreign, "PodDisruptionBudget "+key.String())
		}
		return nil
	}
	if !apply {
		return nil
	}
	if !s.PDBEnabled {
		if pdb == nil {
			return nil
		}
		// Preconditions make sure that exactly the object that was seen
		// as owned is deleted.
		if err := r.Client.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID, ResourceVersion: &pdb.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.event(mc, corev1.EventTypeNormal, EventDeleted, "Delete", "Deleted PodDisruptionBudget %s: it is disabled or size is at most 1", mc.Name)
		return nil
	}
	var owned *policyv1ac.PodDisruptionBudgetApplyConfiguration
	if pdb != nil {
		var err error
		if owned, err = policyv1ac.ExtractPodDisruptionBudget(pdb, r.fieldManager()); err != nil {
			return fmt.Errorf("extracting owned fields: %w", err)
		}
	}
	applied, err := r.applyIfChanged(ctx, desiredPDB(mc, s), owned)
	if err != nil {
		return err
	}
	r.eventForApply(mc, obs, "PodDisruptionBudget", pdb == nil, applied)
	return nil
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
