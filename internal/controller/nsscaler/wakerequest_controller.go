package nsscaler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
)

// wakeRequestControllerName names the controller of the WakeRequests no
// NSScaler decides on.
const wakeRequestControllerName = Name + "-wakerequest"

// wakeRequestReconciler answers the WakeRequests of namespaces no NSScaler
// owns — no NSScaler selects them (NoScaler) or they are protected — and
// hands the others to their owner. It decides nothing else: the NSScaler
// that owns a namespace is the only one that grants there, so the limits
// are counted in one place.
type wakeRequestReconciler struct {
	scalers *Reconciler
	// namespaces reads namespaces (the workload cache).
	namespaces client.Reader
}

// setupWakeRequests adds the WakeRequest controller. One worker: a new
// request costs one list of the NSScalers, and a flood of them is answered
// one after the other without growing anything but the queue.
func (r *Reconciler) setupWakeRequests(mgr ctrl.Manager, namespaces cache.Cache) error {
	w := &wakeRequestReconciler{scalers: r, namespaces: namespaces}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(wakeRequestControllerName).
		// The spec is immutable: a request is looked at when created.
		For(&scalingv1alpha1.WakeRequest{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(shutdown.Quiet[reconcile.Request](w))
	if err != nil {
		return fmt.Errorf("building the wakerequest controller: %w", err)
	}
	return nil
}

func (w *wakeRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wr scalingv1alpha1.WakeRequest
	if err := w.scalers.client.Get(ctx, req.NamespacedName, &wr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wr.Status.Phase != "" {
		return ctrl.Result{}, nil
	}
	var ns corev1.Namespace
	if err := w.namespaces.Get(ctx, client.ObjectKey{Name: wr.Namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // the namespace is going away, and the request with it
		}
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", wr.Namespace, err)
	}
	if w.scalers.protection.Protects(Namespace{Name: ns.Name, Labels: ns.Labels}) {
		return ctrl.Result{}, w.refuse(ctx, &wr, scalingv1alpha1.ReasonProtected,
			fmt.Sprintf("namespace %s is protected and never parked: there is nothing to wake", wr.Namespace))
	}
	owner, err := w.owner(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	if owner != "" {
		// The owner decides (it also watches requests; this only makes
		// sure it looks now).
		w.scalers.wakeups.nudge(owner)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, w.refuse(ctx, &wr, scalingv1alpha1.ReasonNoScaler,
		fmt.Sprintf("no NSScaler parks namespace %s: it is not parked, there is nothing to wake", wr.Namespace))
}

// owner is the NSScaler that acts on the namespace: the oldest one
// selecting it (as PlanNamespaces decides); empty when none does.
func (w *wakeRequestReconciler) owner(ctx context.Context, ns corev1.Namespace) (string, error) {
	var l scalingv1alpha1.NSScalerList
	if err := w.scalers.client.List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing NSScalers: %w", err)
	}
	var owner *scalingv1alpha1.NSScaler
	for i := range l.Items {
		s := &l.Items[i]
		if Selects(s, ns.Name, ns.Labels) && (owner == nil || olderThan(s, owner)) {
			owner = s
		}
	}
	if owner == nil {
		return "", nil
	}
	return owner.Name, nil
}

// refuse writes a final refusal.
func (w *wakeRequestReconciler) refuse(ctx context.Context, wr *scalingv1alpha1.WakeRequest, reason, message string) error {
	v := wakeVerdict{phase: scalingv1alpha1.WakeRequestRefused, reason: reason, message: message}
	if _, err := writeWakeVerdict(ctx, w.scalers.client, wr, "", v, w.scalers.clock.Now()); err != nil {
		return client.IgnoreNotFound(err)
	}
	ev := w.scalers.events.Batch()
	defer ev.Flush()
	w.scalers.reportWakeVerdict(ev, wr, nil, v)
	return nil
}
