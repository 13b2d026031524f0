// Package memcached holds the Memcached controller: it runs a memcached cache as
// a Deployment or StatefulSet, a headless Service, a PodDisruptionBudget and
// optionally a NetworkPolicy owned by the Memcached object, applies them with
// server-side apply, and reports the instances' real readiness and endpoints
// in the status. TLS and auth Secrets are read live, only when labelled
// usable, and only to fingerprint them for rollouts.
package memcached

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
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

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// Name is the controller's name in --controllers and in the names derived
// from it: its field manager status.FieldOwner(Name) and its events'
// reporter status.ReporterName(Name).
const Name = "memcached"

// FieldManager is the field manager of every write: status.FieldOwner(Name),
// a constant so that it can never change.
const FieldManager = "runbook-" + Name

// Defaults of Setup for Options left at zero.
const (
	defaultMaxConcurrentReconciles = 4
	// DefaultSecretResync is how often the Secrets of a Memcached that uses
	// TLS or auth are read again (Secrets are not watched): a renewal
	// reaches the pods within this period.
	DefaultSecretResync = 5 * time.Minute
	// DefaultSecretRecheck is how often a Secret that may not be used yet
	// is looked at again.
	DefaultSecretRecheck = 30 * time.Second
)

// Options configure the Memcached controller (built from flags in cmd).
type Options struct {
	// Clock stamps condition transitions; the real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is the number of Memcached objects reconciled
	// in parallel; 4 when 0.
	MaxConcurrentReconciles int
	// SecretResync and SecretRecheck: DefaultSecretResync and
	// DefaultSecretRecheck when 0.
	SecretResync, SecretRecheck time.Duration
	// Keys fingerprints Secret data for rollouts; when nil, a
	// fingerprint.Source on the manager's clients with OperatorNamespace and
	// FingerprintKeySecret (the key Secret RebootPolicies use too).
	Keys                 *fingerprint.Source
	OperatorNamespace    string
	FingerprintKeySecret string
	// Metrics records Degraded transitions and rollouts; nil records
	// nothing.
	Metrics *Metrics
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
	// APIReader reads Secrets live from the apiserver, one by one: they are
	// never cached, and the manager may only get them.
	APIReader client.Reader
	// Keys fingerprints the data of mounted Secrets.
	Keys *fingerprint.Source
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
	// Metrics of the controller (nil: none).
	Metrics *Metrics
	// MaxConcurrentReconciles is the number of Memcached objects reconciled
	// in parallel (1 when 0).
	MaxConcurrentReconciles int
	// applied remembers which owned objects hold the desired
	// configuration (nil: always compare; a hand-built reconciler).
	applied *appliedMemo
	// SecretResync is how often a Memcached with usable Secrets is
	// reconciled again to see their data change; SecretRecheck, one whose
	// Secret may not be used (yet).
	SecretResync, SecretRecheck time.Duration
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
	if opts.Keys == nil {
		opts.Keys = fingerprint.NewSource(mgr.GetAPIReader(), mgr.GetClient(), opts.OperatorNamespace, opts.FingerprintKeySecret,
			mgr.GetLogger().WithName(Name).WithName("fingerprint-key"))
	}
	r := &Reconciler{
		Client:                  mgr.GetClient(),
		Status:                  status.NewWriter(mgr.GetClient(), mgr.GetAPIReader(), FieldManager),
		Events:                  status.Events{Recorder: mgr.GetEventRecorder(status.ReporterName(Name))},
		APIReader:               mgr.GetAPIReader(),
		Keys:                    opts.Keys,
		Clock:                   opts.Clock,
		Metrics:                 opts.Metrics,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		SecretResync:            cmp.Or(opts.SecretResync, DefaultSecretResync),
		SecretRecheck:           cmp.Or(opts.SecretRecheck, DefaultSecretRecheck),
		applied:                 newAppliedMemo(),
	}
	if err := r.register(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", Name, err)
	}
	return r, nil
}

// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// (StatefulSets, NetworkPolicies and Secrets: beside the code that needs them.)
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
			r.applied.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned objects.
		return ctrl.Result{}, nil
	}
	s, obs := r.prepare(ctx, mc)
	r.reconcileObjects(ctx, mc, s, &obs)
	if namespaceTerminating(obs.applyErr) {
		// The namespace controller is deleting everything in it, this
		// Memcached too: recreating what it deleted cannot succeed, and is
		// neither a degradation to report nor an error to retry.
		log.FromContext(ctx).V(1).Info("namespace is terminating; not applying", "error", obs.applyErr.Error())
		return ctrl.Result{}, nil
	}
	r.reportCreated(mc, &obs)
	if err := r.writeStatus(ctx, mc, obs); err != nil {
		return ctrl.Result{}, errors.Join(obs.applyErr, err)
	}
	if obs.applyErr != nil {
		return ctrl.Result{}, fmt.Errorf("reconciling Memcached %s: %w", req.NamespacedName, obs.applyErr)
	}
	if obs.keyErr != nil {
		log.FromContext(ctx).Error(obs.keyErr, "not applying: the fingerprint key is unavailable")
	}
	return ctrl.Result{RequeueAfter: r.recheckAfter(obs)}, nil
}

// namespaceTerminating: err is the apiserver refusing to create an object
// in a namespace that is being deleted.
func namespaceTerminating(err error) bool {
	return err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// recheckAfter is when to look again at what no watch announces (0: not
// before the next event): whether prometheus-operator got installed, and
// the Secrets (not watched: the manager may only get them). Each look is
// reads only; nothing is written when nothing changed.
func (r *Reconciler) recheckAfter(obs observation) time.Duration {
	var after []time.Duration
	if obs.serviceMonitorUnsupported {
		after = append(after, serviceMonitorRecheck)
	}
	switch {
	case obs.secretNotUsable != "" || obs.keyErr != nil:
		after = append(after, r.SecretRecheck)
	case obs.usesSecrets && obs.invalid == nil:
		after = append(after, r.SecretResync)
	}
	if len(after) == 0 {
		return 0
	}
	return slices.Min(after)
}

// register adds the controller and its watches to mgr. Besides the Memcached objects it watches
// Deployments, StatefulSets, Services, PodDisruptionBudgets and
// NetworkPolicies by name (so a foreign object that goes away unblocks the
// Memcached of the same name), and the EndpointSlices of the owned Services
// (for status.servers). Secrets are not watched (recheckAfter).
func (r *Reconciler) register(mgr ctrl.Manager) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.memcachedNamed(ctx, o.GetNamespace(), o.GetName())
	})
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, indexSliceService, sliceService); err != nil {
		return fmt.Errorf("indexing EndpointSlices by Service: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Status-only changes are the controller's own writes: no reconcile.
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Updates pass only when they change what a reconcile reads
		// (watchfilters.go).
		Watches(&appsv1.Deployment{}, sameName, builder.WithPredicates(ownedFilter(deploymentChanged))).
		Watches(&appsv1.StatefulSet{}, sameName, builder.WithPredicates(ownedFilter(statefulSetChanged))).
		Watches(&corev1.Service{}, sameName, builder.WithPredicates(ownedFilter(serviceChanged))).
		Watches(&policyv1.PodDisruptionBudget{}, sameName, builder.WithPredicates(ownedFilter(pdbChanged))).
		Watches(&networkingv1.NetworkPolicy{}, sameName, builder.WithPredicates(ownedFilter(networkPolicyChanged))).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.memcachedOfSlice),
			builder.WithPredicates(watchFilter(endpointSliceChanged, sliceListsEndpoints))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named(Name).
		Complete(shutdown.Quiet[reconcile.Request](r))
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
