package nsscaler

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// The GitOps objects an NSScaler paused are watched, so that one resumed by
// someone else (flux resume, a kubectl patch, the tool's own controller)
// while its namespace is parked reconciles the NSScaler that paused it at
// once instead of at the next workload change. Only the kinds whose CRD is
// served when the manager starts are watched (a CRD installed later is
// still used by the reconciles, which list from the apiserver, but not
// watched until a restart), from a small cache of their own that keeps
// only what the predicate reads: the record and the paused field.

// watchGitOps adds the watches of the GitOps kinds served now to ctl.
func (r *Reconciler) watchGitOps(mgr ctrl.Manager, ctl controller.Controller) error {
	kinds := servedGitOpsKinds(mgr.GetRESTMapper(), func(k *gitOpsKind, err error) {
		mgr.GetLogger().WithName(Name).Info("not watching a GitOps kind: its API could not be looked up", "kind", k.gvk, "error", err.Error())
	})
	if len(kinds) == 0 {
		return nil
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: trimGitOpsObject,
	})
	if err != nil {
		return fmt.Errorf("building the nsscaler gitops cache: %w", err)
	}
	if err := mgr.Add(status.ManagedCache{Cache: c}); err != nil {
		return fmt.Errorf("adding the nsscaler gitops cache: %w", err)
	}
	for _, k := range kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		src := source.Kind(c, client.Object(u), handler.EnqueueRequestsFromMapFunc(r.scalersForGitOpsObject), resumedWhileRecorded(k))
		if err := ctl.Watch(src); err != nil {
			return fmt.Errorf("watching %s: %w", k.gvk.GroupKind(), err)
		}
	}
	return nil
}

// servedGitOpsKinds are the GitOps kinds the apiserver serves; a lookup
// that fails for another reason than an unknown kind is reported to
// failed and the kind left unwatched.
func servedGitOpsKinds(mapper meta.RESTMapper, failed func(*gitOpsKind, error)) []*gitOpsKind {
	var served []*gitOpsKind
	for _, k := range gitOpsKinds {
		_, err := mapper.RESTMapping(k.gvk.GroupKind(), k.gvk.Version)
		switch {
		case err == nil:
			served = append(served, k)
		case meta.IsNoMatchError(err):
		default:
			failed(k, err)
		}
	}
	return served
}

// gitOpsKindOf is the GitOps kind of u (nil: none).
func gitOpsKindOf(u *unstructured.Unstructured) *gitOpsKind {
	gvk := u.GroupVersionKind()
	for _, k := range gitOpsKinds {
		if k.gvk == gvk {
			return k
		}
	}
	return nil
}

// trimGitOpsObject is the cache transform: the identity, the record (when
// it is not longer than a record can be) and the paused field; the rest
// (an Application's status lists every resource it deploys) is dropped.
func trimGitOpsObject(o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	k := gitOpsKindOf(u)
	if k == nil {
		return o, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetGroupVersionKind(u.GroupVersionKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	if rec, found := u.GetAnnotations()[AnnotationGitOpsPaused]; found && len(rec) <= maxGitOpsRecordLength {
		out.SetAnnotations(map[string]string{AnnotationGitOpsPaused: rec})
	}
	if v, found, err := unstructured.NestedFieldCopy(u.Object, k.field...); err == nil && found {
		if err := unstructured.SetNestedField(out.Object, v, k.field...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resumedWhileRecorded passes the events of an object of kind k that
// carries an NSScaler's record but is not paused — someone resumed what an
// NSScaler paused — and the deletion of one with a record (the NSScaler
// holds one object fewer). The controller's own writes never pass: a pause
// leaves the object paused, a resume removes the record.
func resumedWhileRecorded(k *gitOpsKind) predicate.Funcs {
	recorded := func(o client.Object) bool {
		_, found := o.GetAnnotations()[AnnotationGitOpsPaused]
		return found
	}
	running := func(o client.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		return ok && recorded(u) && !k.isPaused(u)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return running(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return running(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return recorded(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return running(e.Object) },
	}
}

// scalersForGitOpsObject maps an object to the NSScaler its record names,
// when that NSScaler pauses objects of the kind or holds some paused: a
// record anyone wrote on an object they may edit reconciles no other
// NSScaler, and the reconcile decides from the object's own spec and
// status as always.
func (r *Reconciler) scalersForGitOpsObject(ctx context.Context, obj client.Object) []reconcile.Request {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	k := gitOpsKindOf(u)
	raw, found := u.GetAnnotations()[AnnotationGitOpsPaused]
	if k == nil || !found || len(raw) > maxGitOpsRecordLength {
		return nil
	}
	var rec gitOpsRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.By == "" {
		log.FromContext(ctx).V(1).Info("gitops object with an unreadable record", "kind", k.kind, "object", client.ObjectKeyFromObject(u))
		return nil
	}
	return r.scalersWhere(ctx, func(s *scalingv1alpha1.NSScaler) bool {
		return s.Name == rec.By && (k.enabled(s.Spec.GitOps) || (s.Status.GitOps != nil && s.Status.GitOps.PausedCount > 0))
	})
}
