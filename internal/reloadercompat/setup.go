package reloadercompat

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// +kubebuilder:rbac:groups=autoreboot.runbook.dev,resources=rebootpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Name is the compat controllers' name prefix (and the event reporter).
const Name = "reloadercompat"

// Options are the admin's settings of the compatibility mode.
type Options struct {
	// MaxPerNamespace bounds the workloads of a namespace the mode makes
	// RebootPolicies for (first come, first served); 0: no limit.
	MaxPerNamespace int
	// SettleDelay of every compat RebootPolicy (0: none, like Reloader).
	SettleDelay time.Duration
	// Namespaces are the manager's --watch-namespaces (empty: all).
	Namespaces []string
	Metrics    *Metrics
	// EventBudget is the manager-wide bound on events (built in main,
	// shared by every controller); nil bounds nothing.
	EventBudget *status.EventBudget
}

// Setup adds one compat controller per workload kind to mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	cms, err := cache.New(mgr.GetConfig(), newConfigMapCache(cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
	}, opts.Namespaces))
	if err != nil {
		return fmt.Errorf("building the reloader-compat ConfigMap cache: %w", err)
	}
	if _, err := cms.GetInformer(context.Background(), configMapMeta(), cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching ConfigMap metadata: %w", err)
	}
	if err := mgr.Add(cms); err != nil {
		return fmt.Errorf("adding the reloader-compat ConfigMap cache: %w", err)
	}
	events := status.NewEvents(mgr, Name, opts.EventBudget)
	admission := &Admission{Reader: mgr.GetAPIReader()}
	for _, kind := range Kinds {
		r := &Reconciler{
			Client: mgr.GetClient(), Kind: kind,
			Resolver: resolver{source: clusterMetadata{configMaps: cms, secrets: mgr.GetAPIReader()}},
			Settings: settings{settleDelay: opts.SettleDelay, period: 10}, MaxPerNamespace: opts.MaxPerNamespace,
			Admission: admission, Events: events, Metrics: opts.Metrics,
		}
		if err := r.SetupWithManager(mgr, cms); err != nil {
			return err
		}
	}
	return nil
}

// SetupWithManager registers the controller of r.Kind: its workloads,
// the RebootPolicies it made, and ConfigMaps whose Reloader annotations,
// existence or name may change what a workload of the namespace tracks.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, cms cache.Cache) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(Name+"-"+strings.ToLower(string(r.Kind))).
		For(newWorkload(r.Kind), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&autorebootv1alpha1.RebootPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WatchesRawSource(source.Kind(cms, configMapMeta(),
			handler.TypedEnqueueRequestsFromMapFunc(r.annotatedWorkloadsOf), reloaderMetadataChanged())).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the reloader-compat %s controller: %w", r.Kind, err)
	}
	return nil
}

// annotatedWorkloadsOf: every workload of r.Kind in the ConfigMap's
// namespace that carries Reloader annotations.
func (r *Reconciler) annotatedWorkloadsOf(ctx context.Context, cm *metav1.PartialObjectMetadata) []reconcile.Request {
	list := newWorkloadList(r.Kind)
	if err := r.Client.List(ctx, list, client.InNamespace(cm.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if w := o.(client.Object); annotated(w) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
		return nil
	})
	return out
}

// reloaderMetadataChanged passes ConfigMaps created or deleted (a reload
// list's expression may match them) and changes of their Reloader
// annotations; a data change is the RebootPolicy controller's business.
func reloaderMetadataChanged() predicate.TypedPredicate[*metav1.PartialObjectMetadata] {
	return predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
		UpdateFunc: func(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
			return !maps.Equal(e.ObjectOld.Annotations, e.ObjectNew.Annotations)
		},
	}
}
