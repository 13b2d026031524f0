// Package memcached holds the Memcached controller: it runs a memcached cache as
// a Deployment, a headless Service and a PodDisruptionBudget owned by the
// Memcached object, applies them with server-side apply, and reports the
// instances' real readiness and endpoints in the status.
package memcached

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// Name is the controller's name in --controllers and in the names derived
// from it: its field manager status.FieldOwner(Name) and its events'
// reporter status.ReporterName(Name).
const Name = "memcached"

// FieldManager is the field manager of every write: status.FieldOwner(Name),
// a constant so that it can never change.
const FieldManager = "runbook-" + Name

// defaultMaxConcurrentReconciles is the parallelism of Setup when Options
// leave it at 0.
const defaultMaxConcurrentReconciles = 4

// Options configure the Memcached controller (built from flags in cmd).
type Options struct {
	// Clock stamps condition transitions; the real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is the number of Memcached objects reconciled
	// in parallel; 4 when 0.
	MaxConcurrentReconciles int
}

// Reconciler reconciles Memcached objects. Setup builds it from the
// manager; a unit test may build one by hand from these fields.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// Status writes the status subresource, from fresh data and with an
	// optimistic lock.
	Status *status.Writer
	// Events records events on the Memcached objects.
	Events status.Events
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is the number of Memcached objects reconciled
	// in parallel (1 when 0).
	MaxConcurrentReconciles int
}

// Setup builds the reconciler from mgr (client, APIReader, event recorder)
// and registers it. It returns the reconciler so tests can drive it.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = defaultMaxConcurrentReconciles
	}
	r := &Reconciler{
		Client:                  mgr.GetClient(),
		Status:                  status.NewWriter(mgr.GetClient(), mgr.GetAPIReader(), FieldManager),
		Events:                  status.Events{Recorder: mgr.GetEventRecorder(status.ReporterName(Name))},
		Clock:                   opts.Clock,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	}
	if err := r.register(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", Name, err)
	}
	return r, nil
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
		if apierrors.IsNotFound(err) {
			r.Status.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned objects.
		return ctrl.Result{}, nil
	}
	s, invalid := resolveSettings(&mc.Spec)
	obs := r.reconcileObjects(ctx, mc, s, invalid)
	r.reportCreated(mc, &obs)
	if err := r.writeStatus(ctx, mc, obs); err != nil {
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

// register adds the controller and its watches to mgr. Besides the Memcached objects it watches
// Deployments, Services and PodDisruptionBudgets by name (so a foreign
// object that goes away unblocks the Memcached of the same name), and the
// EndpointSlices of the owned Services (for status.servers).
func (r *Reconciler) register(mgr ctrl.Manager) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.memcachedNamed(ctx, o.GetNamespace(), o.GetName())
	})
	return ctrl.NewControllerManagedBy(mgr).
		// Status-only changes are the controller's own writes: no reconcile.
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&appsv1.Deployment{}, sameName).
		Watches(&corev1.Service{}, sameName).
		Watches(&policyv1.PodDisruptionBudget{}, sameName).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.memcachedOfSlice)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named(Name).
		Complete(r)
}

// memcachedOfSlice maps an EndpointSlice of an owned Service (the Service's
// labels are copied to its slices) to the Memcached of the Service's name.
func (r *Reconciler) memcachedOfSlice(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" || o.GetLabels()[labelManagedBy] != managedByValue {
		return nil
	}
	return r.memcachedNamed(ctx, o.GetNamespace(), svc)
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
