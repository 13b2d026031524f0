// Package memcached holds the Memcached controller: it runs a memcached cache as
// a Deployment or StatefulSet, a headless Service, a PodDisruptionBudget and
// optionally a NetworkPolicy owned by the Memcached object, applies them with
// server-side apply, and reports the instances' real readiness and endpoints
// in the status. TLS and auth Secrets are read live, only when labelled
// usable, and only to fingerprint them for rollouts.
package memcached

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// Name is the controller's name in --controllers and in the names derived
// from it: its field manager status.FieldOwner(Name) and its events'
// reporter status.ReporterName(Name).
const Name = "memcached"

// FieldManager is the field manager of every write (a constant so that it
// can never change).
const FieldManager = status.FieldOwnerPrefix + Name

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
	// TLSAgentImage runs beside memcached with TLS (DefaultTLSAgentImage
	// when empty).
	TLSAgentImage string
	// Issuance is what tls.issuerRef may ask cert-manager for
	// (certificate_policy.go).
	Issuance IssuancePolicy
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

// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// (StatefulSets, NetworkPolicies and Secrets: beside the code that needs them.)
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// scope is one reconcile of one Memcached: the object as read, the
// settings resolved from its spec, and what the phases saw, including the
// events they tell (obs.events, recorded once when the reconcile ends).
type scope struct {
	mc       *cachev1alpha1.Memcached
	settings settings
	obs      observation
}

// Reconcile makes the owned objects of one Memcached match its spec and
// writes its status, each only when something differs: fetch, the scope
// (settings and Secrets), apply the owned objects, observe the restarts,
// one status write, then the events of the pass. The phases keep their
// errors in the observation, so that the status reports them before the
// reconcile returns them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc, err := r.fetch(ctx, req.NamespacedName)
	if mc == nil || err != nil {
		return ctrl.Result{}, err
	}
	sc := r.newScope(ctx, mc)
	obs := &sc.obs
	defer obs.events.Flush()
	r.reconcileObjects(ctx, sc.mc, sc.settings, obs)
	if err := r.observeRestarts(ctx, sc.mc, sc.settings, obs); err != nil && obs.applyErr == nil {
		obs.applyErr = status.InPhase("restarts", err)
	}
	if namespaceTerminating(obs.applyErr) {
		// The namespace controller is deleting everything in it, this
		// Memcached too: recreating what it deleted cannot succeed, and is
		// neither a degradation to report nor an error to retry.
		log.FromContext(ctx).V(1).Info("namespace is terminating; not applying", "error", obs.applyErr.Error())
		return ctrl.Result{}, nil
	}
	r.reportCreated(sc.mc, obs)
	if err := r.writeStatus(ctx, sc.mc, obs); err != nil {
		return ctrl.Result{}, errors.Join(obs.applyErr, status.InPhase("status", err))
	}
	if obs.applyErr != nil {
		return ctrl.Result{}, fmt.Errorf("reconciling Memcached %s: %w", req.NamespacedName, obs.applyErr)
	}
	if obs.keyErr != nil {
		log.FromContext(ctx).Error(obs.keyErr, "not applying: the fingerprint key is unavailable")
	}
	return requeue(r.recheckAfter(*obs)), nil
}

// requeue is the result of a pass that rechecks after after (none when
// 0): rechecks are not news for the status, and go at the default
// priority whatever the priority of the event that enqueued the pass.
func requeue(after time.Duration) ctrl.Result {
	if after <= 0 {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: after, Priority: ptr.To(status.DefaultPriority)}
}

// newScope starts a pass: the settings resolved from the spec and the
// Secrets it names (prepare), and the pass's event batch.
func (r *Reconciler) newScope(ctx context.Context, mc *cachev1alpha1.Memcached) *scope {
	sc := &scope{mc: mc}
	sc.settings, sc.obs = r.prepare(ctx, mc)
	sc.obs.events = r.Events.Batch()
	return sc
}

// fetch reads the Memcached; nil when it is gone (what the controller kept
// about it is dropped) or being deleted (the garbage collector removes the
// owned objects).
func (r *Reconciler) fetch(ctx context.Context, key types.NamespacedName) (*cachev1alpha1.Memcached, error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, key, mc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Status.Forget(key)
			r.applied.forget(key)
			return nil, nil
		}
		return nil, fmt.Errorf("reading Memcached %s: %w", key, err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return mc, nil
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
	if obs.issuance.recheck > 0 {
		after = append(after, obs.issuance.recheck)
	}
	if len(after) == 0 {
		return 0
	}
	return slices.Min(after)
}
