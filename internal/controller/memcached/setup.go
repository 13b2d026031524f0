package memcached

import (
	"cmp"
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// Defaults of Setup for Options left at zero.
const (
	// DefaultMaxConcurrentReconciles is how many Memcached objects are
	// reconciled at once unless the admin says otherwise.
	DefaultMaxConcurrentReconciles = 4
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
	// in parallel; DefaultMaxConcurrentReconciles when not positive.
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
	// TLSAgentImage is the image of the TLS agent beside memcached;
	// DefaultTLSAgentImage when empty.
	TLSAgentImage string
	// Issuance is what tls.issuerRef may ask cert-manager for.
	Issuance IssuancePolicy
	// EventBudget is the manager-wide bound on events (built in main,
	// shared by every controller); nil bounds nothing.
	EventBudget *status.EventBudget
}

// withDefaults fills in what opts leave at zero.
func (o Options) withDefaults() (Options, error) {
	o.Clock = cmp.Or[clock.PassiveClock](o.Clock, clock.RealClock{})
	o.MaxConcurrentReconciles = status.PositiveOr(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	o.SecretResync = cmp.Or(o.SecretResync, DefaultSecretResync)
	o.SecretRecheck = cmp.Or(o.SecretRecheck, DefaultSecretRecheck)
	return o, nil
}

// Setup builds the reconciler from mgr (client, APIReader, event recorder)
// and registers it. It returns the reconciler so tests can drive it.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Keys == nil {
		opts.Keys = fingerprint.NewManagerSource(mgr, opts.OperatorNamespace, opts.FingerprintKeySecret, mgr.GetLogger().WithName(Name))
	}
	reporting := status.NewReporting(mgr, Name, opts.EventBudget)
	r := &Reconciler{
		Client:                  mgr.GetClient(),
		Status:                  reporting.Status,
		Events:                  reporting.Events,
		APIReader:               mgr.GetAPIReader(),
		Keys:                    opts.Keys,
		Clock:                   opts.Clock,
		Metrics:                 opts.Metrics,
		TLSAgentImage:           opts.TLSAgentImage,
		Issuance:                opts.Issuance,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		SecretResync:            opts.SecretResync,
		SecretRecheck:           opts.SecretRecheck,
		applied:                 newAppliedMemo(),
	}
	if err := r.register(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", Name, err)
	}
	return r, nil
}

// register adds the controller and its watches to mgr. Besides the Memcached objects it watches
// Deployments, StatefulSets, Services, PodDisruptionBudgets and
// NetworkPolicies by name (so a foreign object that goes away unblocks the
// Memcached of the same name), and the EndpointSlices of the owned Services
// (for status.servers). Secrets are not watched (recheckAfter).
func (r *Reconciler) register(mgr ctrl.Manager) error {
	h := r.handlers()
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, indexSliceService, sliceService)
	if err != nil {
		return fmt.Errorf("indexing EndpointSlices by Service: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// Status-only changes are the controller's own writes: no reconcile.
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Updates pass only when they change what a reconcile reads
		// (watchfilters.go).
		Watches(&appsv1.Deployment{}, h.deployment, builder.WithPredicates(ownedFilter(deploymentChanged))).
		Watches(&appsv1.StatefulSet{}, h.statefulSet, builder.WithPredicates(ownedFilter(statefulSetChanged))).
		Watches(&corev1.Service{}, h.sameName, builder.WithPredicates(ownedFilter(serviceChanged))).
		Watches(&policyv1.PodDisruptionBudget{}, h.sameName, builder.WithPredicates(ownedFilter(pdbChanged))).
		Watches(&networkingv1.NetworkPolicy{}, h.sameName, builder.WithPredicates(ownedFilter(networkPolicyChanged))).
		Watches(&discoveryv1.EndpointSlice{}, h.slice,
			builder.WithPredicates(watchFilter(endpointSliceChanged, sliceListsEndpoints)))
	if b, err = watchCertificates(mgr, b, h.sameName); err != nil {
		return err
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named(Name).
		Complete(shutdown.Quiet[reconcile.Request](r))
}

// watchHandlers are the event handlers of the watches of other kinds
// than Memcached.
type watchHandlers struct {
	// sameName enqueues the Memcached of the object's name.
	sameName handler.EventHandler
	// deployment, statefulSet and slice also put the news for the status
	// (watchfilters.go) ahead of creations and spec work in the queue.
	deployment, statefulSet, slice handler.EventHandler
}

func (r *Reconciler) handlers() watchHandlers {
	sameName := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.memcachedNamed(ctx, o.GetNamespace(), o.GetName())
	})
	return watchHandlers{
		sameName:    sameName,
		deployment:  status.PrioritizeNews(sameName, deploymentNews),
		statefulSet: status.PrioritizeNews(sameName, statefulSetNews),
		slice:       status.PrioritizeNews(handler.EnqueueRequestsFromMapFunc(r.memcachedOfSlice), sliceNews),
	}
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
