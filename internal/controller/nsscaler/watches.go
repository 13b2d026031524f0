package nsscaler

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/shutdown"
)

// build registers the controller and its watches: its NSScalers, every other
// NSScaler (a change can move the ownership of a namespace), and, from the
// workload cache, namespaces, workloads and pods. The custom kinds are
// watched when first needed (customKinds).
func (r *Reconciler) build(mgr ctrl.Manager, c cache.Cache, maxConcurrentReconciles int) (controller.Controller, error) {
	ctl, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&scalingv1alpha1.NSScaler{}).
		Watches(&scalingv1alpha1.NSScaler{}, handler.EnqueueRequestsFromMapFunc(r.allScalers)).
		WatchesRawSource(source.Kind(c, client.Object(&corev1.Namespace{}), handler.EnqueueRequestsFromMapFunc(r.scalersForNamespaceObject),
			predicate.Or[client.Object](predicate.LabelChangedPredicate{}, createOrDelete()))).
		WatchesRawSource(r.workloadSource(c, &appsv1.Deployment{})).
		WatchesRawSource(r.workloadSource(c, &appsv1.StatefulSet{})).
		WatchesRawSource(r.workloadSource(c, &batchv1.CronJob{})).
		// Only creations and deletions change the pod count.
		WatchesRawSource(source.Kind(c, client.Object(podMetadata()), handler.EnqueueRequestsFromMapFunc(r.scalersForPod), createOrDelete())).
		// The instants at which an NSScaler's state changes by itself.
		WatchesRawSource(r.wakeups.source()).
		Watches(&scalingv1alpha1.WakeRequest{}, handler.EnqueueRequestsFromMapFunc(r.scalersForWakeRequest), builder.WithPredicates(createOrDelete())).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Build(shutdown.Quiet[reconcile.Request](r))
	if err != nil {
		return nil, fmt.Errorf("building the nsscaler controller: %w", err)
	}
	return ctl, nil
}

// workloadPredicate: a workload matters when its spec (replicas, suspend,
// a ScaledObject's target), its annotations (the original, exclusions, the
// KEDA pause: the cache keeps no others) or its labels (excludeSelector)
// change.
func workloadPredicate() predicate.Predicate {
	return predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
}

// workloadSource watches a kind of workload (obj is an empty object of it).
// The own-write filter comes first: it also tells the write tracker that
// the cache caught up, whatever the other predicates say.
func (r *Reconciler) workloadSource(c cache.Cache, obj client.Object) source.Source {
	return source.Kind(c, obj, handler.EnqueueRequestsFromMapFunc(r.scalersForWorkload), r.notOwnWrite(), workloadPredicate())
}

// notOwnWrite drops the update events that only echo the controller's own
// workload writes. A park of 20,000 workloads is followed by 20,000 such
// events; each would map the workload to its NSScalers (twice: old and new
// object) and queue a reconcile that lists and decides on every workload
// again, only to find what the reconcile that wrote them already counted.
// An update by anyone else has another resourceVersion and passes.
func (r *Reconciler) notOwnWrite() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectNew == nil || !r.tracker.observed(e.ObjectNew.GetUID(), e.ObjectNew.GetResourceVersion())
	}}
}

// informerSource watches a run-time kind through its informer (started
// and, if need be, removed by dynamicKinds).
func (r *Reconciler) informerSource(inf cache.Informer) source.Source {
	return &source.Informer{Informer: inf, Handler: handler.EnqueueRequestsFromMapFunc(r.scalersForWorkload),
		Predicates: []predicate.Predicate{r.notOwnWrite(), workloadPredicate()}}
}

func createOrDelete() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

func (r *Reconciler) allScalers(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.scalersWhere(ctx, func(*scalingv1alpha1.NSScaler) bool { return true })
}

// scalersWhere lists the NSScalers (from the cache, not copied: only read)
// that match.
func (r *Reconciler) scalersWhere(ctx context.Context, match func(*scalingv1alpha1.NSScaler) bool) []reconcile.Request {
	var l scalingv1alpha1.NSScalerList
	if err := r.client.List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NSScalers")
		return nil
	}
	var reqs []reconcile.Request
	for i := range l.Items {
		if match(&l.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
		}
	}
	return reqs
}

// scalersFor maps a namespace to the NSScalers that select it or list it in
// their status (so a namespace that stops matching is restored), plus the
// NSScaler named in a workload's annotation.
func (r *Reconciler) scalersFor(ctx context.Context, ns string, nsLabels map[string]string, parkedBy string) []reconcile.Request {
	return r.scalersWhere(ctx, func(s *scalingv1alpha1.NSScaler) bool {
		return s.Name == parkedBy || Selects(s, ns, nsLabels) || listsNamespace(s.Status, ns)
	})
}

func listsNamespace(st scalingv1alpha1.NSScalerStatus, ns string) bool {
	return slices.Contains(st.ParkedNamespaces, ns) || slices.Contains(st.ActiveNamespaces, ns)
}

func (r *Reconciler) scalersForNamespaceObject(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.scalersFor(ctx, obj.GetName(), obj.GetLabels(), "")
}

func (r *Reconciler) namespaceLabels(ctx context.Context, name string) map[string]string {
	var ns corev1.Namespace
	if err := r.cache.Get(ctx, client.ObjectKey{Name: name}, &ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return ns.Labels
}

func (r *Reconciler) scalersForWorkload(ctx context.Context, obj client.Object) []reconcile.Request {
	by := ""
	if v, ok := obj.GetAnnotations()[AnnotationOriginal]; ok {
		if o, err := DecodeOriginal(v); err == nil {
			by = o.By
		}
	}
	return r.scalersFor(ctx, obj.GetNamespace(), r.namespaceLabels(ctx, obj.GetNamespace()), by)
}

// scalersForPod maps a pod to the NSScalers that hold its namespace parked
// (they count its pods).
func (r *Reconciler) scalersForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.scalersWhere(ctx, func(s *scalingv1alpha1.NSScaler) bool {
		return slices.Contains(s.Status.ParkedNamespaces, obj.GetNamespace())
	})
}
