// Package nsscaler holds the NSScaler controller: it parks (scales to zero or
// suspends) every workload of the namespaces an NSScaler selects, except a
// whitelist, and restores each to its recorded original.
package nsscaler

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
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
)

// Finalizer holds an NSScaler until its parked workloads are restored.
const Finalizer = "scaling.runbook.dev/restore"

// ControllerName names the controller, its event reporter and its logs.
const ControllerName = "nsscaler"

// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers/status,verbs=get;patch
// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=nsscalers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cache.runbook.dev,resources=memcacheds/scale,verbs=get;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler reconciles NSScalers. Every dependency is a field set by the
// caller (main or a test); SetupWithManager fills the rest.
type Reconciler struct {
	// Client reads NSScalers from the manager's cache and writes them.
	Client client.Client
	// Writer patches workloads. Nil (the normal case) builds a client that
	// speaks protobuf with the apiserver where the kind allows it.
	Writer client.Client
	// APIReader reads straight from the apiserver (after a 409 conflict).
	APIReader client.Reader
	// Cache holds namespaces, workloads (including custom kinds) and pod
	// metadata. Nil (the normal case) builds the controller's own trimmed
	// cache (see newWorkloadCache); tests may pass the manager's.
	Cache cache.Cache
	// RESTMapper resolves custom-resource kinds.
	RESTMapper meta.RESTMapper
	Recorder   events.EventRecorder
	Clock      clock.PassiveClock
	Metrics    *Metrics
	// OperatorNamespace is never parked (nor are kube-system, kube-public
	// and kube-node-lease).
	OperatorNamespace string
	// WriteConcurrency bounds the workload writes in flight (default 16).
	WriteConcurrency int
	// WriteQPS, when positive, also caps the workload writes per second
	// (a gentler park of thousands of workloads on a busy apiserver).
	WriteQPS float64

	protected  sets.Set[string]
	tracker    *writeTracker
	builtins   []kindHandler
	controller controller.Controller

	customMu sync.Mutex
	custom   map[KindKey]*scaleHandler
}

// SetupWithManager fills the reconciler's defaults and registers the
// controller and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Writer == nil {
		w, err := newWorkloadWriter(mgr, r.WriteQPS)
		if err != nil {
			return err
		}
		r.Writer = w
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Cache == nil {
		c, err := newWorkloadCache(mgr)
		if err != nil {
			return err
		}
		r.Cache = c
	}
	if r.RESTMapper == nil {
		r.RESTMapper = mgr.GetRESTMapper()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(ControllerName)
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Metrics == nil {
		return fmt.Errorf("nsscaler: Metrics must be set (build them with NewMetrics)")
	}
	if r.WriteConcurrency <= 0 {
		r.WriteConcurrency = 16
	}
	r.protected = ProtectedNamespaces(r.OperatorNamespace)
	r.tracker = newWriteTracker()
	r.custom = map[KindKey]*scaleHandler{}
	r.builtins = []kindHandler{
		newDeploymentHandler(r.Cache, r.APIReader, r.Writer),
		newStatefulSetHandler(r.Cache, r.APIReader, r.Writer),
		newCronJobHandler(r.Cache, r.APIReader, r.Writer),
	}

	workloadChanges := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	podCount := predicate.Funcs{
		// Only creations and deletions change the pod count.
		UpdateFunc: func(event.UpdateEvent) bool { return false },
	}
	workload := func(obj client.Object) source.Source {
		return source.Kind(r.Cache, obj, handler.EnqueueRequestsFromMapFunc(r.scalersForWorkload), workloadChanges)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&scalingv1alpha1.NSScaler{}).
		// Another NSScaler's change can move the ownership of a namespace.
		Watches(&scalingv1alpha1.NSScaler{}, handler.EnqueueRequestsFromMapFunc(r.allScalers)).
		WatchesRawSource(source.Kind(r.Cache, client.Object(&corev1.Namespace{}), handler.EnqueueRequestsFromMapFunc(r.scalersForNamespaceObject),
			predicate.Or[client.Object](predicate.LabelChangedPredicate{}, createOrDelete()))).
		WatchesRawSource(workload(&appsv1.Deployment{})).
		WatchesRawSource(workload(&appsv1.StatefulSet{})).
		WatchesRawSource(workload(&batchv1.CronJob{})).
		WatchesRawSource(source.Kind(r.Cache, client.Object(podMetadata()), handler.EnqueueRequestsFromMapFunc(r.scalersForPod), podCount)).
		Build(r)
	if err != nil {
		return fmt.Errorf("building nsscaler controller: %w", err)
	}
	r.controller = c
	return nil
}

func createOrDelete() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

func (r *Reconciler) allScalers(ctx context.Context, _ client.Object) []reconcile.Request {
	var l scalingv1alpha1.NSScalerList
	if err := r.Client.List(ctx, &l); err != nil {
		log.FromContext(ctx).Error(err, "listing NSScalers")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(l.Items))
	for i := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
	}
	return reqs
}

// scalersFor maps a namespace to the NSScalers that select it or list it in
// their status (so a namespace that stops matching is restored), plus the
// NSScaler named in a workload's annotation.
func (r *Reconciler) scalersFor(ctx context.Context, ns string, nsLabels map[string]string, parkedBy string) []reconcile.Request {
	var l scalingv1alpha1.NSScalerList
	if err := r.Client.List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing NSScalers")
		return nil
	}
	var reqs []reconcile.Request
	for i := range l.Items {
		s := &l.Items[i]
		if s.Name == parkedBy || Selects(s, ns, nsLabels) || listsNamespace(s.Status, ns) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
		}
	}
	return reqs
}

func listsNamespace(st scalingv1alpha1.NSScalerStatus, ns string) bool {
	for _, n := range st.ParkedNamespaces {
		if n == ns {
			return true
		}
	}
	for _, n := range st.ActiveNamespaces {
		if n == ns {
			return true
		}
	}
	return false
}

func (r *Reconciler) scalersForNamespaceObject(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.scalersFor(ctx, obj.GetName(), obj.GetLabels(), "")
}

func (r *Reconciler) namespaceLabels(ctx context.Context, name string) map[string]string {
	var ns corev1.Namespace
	if err := r.Cache.Get(ctx, client.ObjectKey{Name: name}, &ns, client.UnsafeDisableDeepCopy); err != nil {
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

func (r *Reconciler) scalersForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	var l scalingv1alpha1.NSScalerList
	if err := r.Client.List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range l.Items {
		for _, n := range l.Items[i].Status.ParkedNamespaces {
			if n == obj.GetNamespace() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
				break
			}
		}
	}
	return reqs
}

// customHandler returns the handler of a custom-resource kind, starting a
// watch on the kind the first time it is needed. It fails (and is retried on
// the next reconcile) while the kind is not served or has no scale
// subresource.
func (r *Reconciler) customHandler(ctx context.Context, k KindKey) (*scaleHandler, error) {
	r.customMu.Lock()
	defer r.customMu.Unlock()
	if h, ok := r.custom[k]; ok {
		return h, nil
	}
	mapping, err := r.RESTMapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind})
	if err != nil {
		return nil, fmt.Errorf("resolving kind %s: %w", k, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("kind %s is not namespaced", k)
	}
	path, err := specReplicasPath(ctx, r.APIReader, mapping.GroupVersionKind, mapping.Resource.Resource)
	if err != nil {
		return nil, err
	}
	h := &scaleHandler{kind: k, gvk: mapping.GroupVersionKind, replicasPath: path, cache: r.Cache, apiReader: r.APIReader, client: r.Writer}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	src := source.Kind[client.Object](r.Cache, u, handler.EnqueueRequestsFromMapFunc(r.scalersForWorkload),
		predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	if err := r.controller.Watch(src); err != nil {
		return nil, fmt.Errorf("watching %s: %w", k, err)
	}
	r.custom[k] = h
	return h, nil
}
