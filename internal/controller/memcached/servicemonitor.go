package memcached

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// serviceMonitorGVK is prometheus-operator's ServiceMonitor. The controller
// does not import prometheus-operator: the object is built unstructured and
// only when the cluster serves the kind.
var serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// serviceMonitorRecheck is how often a Memcached that wants a ServiceMonitor
// the cluster cannot serve looks for the kind again.
const serviceMonitorRecheck = 10 * time.Minute

// AnnotationServiceMonitor on the owned Service records that the controller
// manages a ServiceMonitor for it, so that disabling it deletes the
// ServiceMonitor without probing the API for the kind on every reconcile.
const AnnotationServiceMonitor = "cache.runbook.dev/service-monitor"

// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;create;patch;delete

// reconcileServiceMonitor applies the ServiceMonitor when the exporter and
// its ServiceMonitor are enabled and deletes the owned one when it was
// created before (hadOne: the Service carried AnnotationServiceMonitor). It is
// read directly from the apiserver (not watched: the CRD may appear or
// vanish at any time), so a manual edit is corrected at the next reconcile
// of the Memcached.
func (r *Reconciler) reconcileServiceMonitor(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply, hadOne bool, obs *observation) error {
	if !s.ServiceMonitor && !hadOne {
		// Nothing wanted and nothing created before: no discovery request.
		return nil
	}
	served, err := servesKind(r.Client.RESTMapper(), serviceMonitorGVK)
	if err != nil {
		return err
	}
	if !served {
		obs.serviceMonitorUnsupported = s.ServiceMonitor
		return nil
	}
	live, err := getUnstructured(ctx, r.Client, serviceMonitorGVK, client.ObjectKeyFromObject(mc))
	if err != nil {
		return fmt.Errorf("reading ServiceMonitor: %w", err)
	}
	switch {
	case live != nil && !metav1.IsControlledBy(live, mc):
		if s.ServiceMonitor {
			obs.foreign = append(obs.foreign, describeForeign("ServiceMonitor", live, mc))
		}
		return nil
	case !apply:
		return nil
	case !s.ServiceMonitor:
		return r.deleteServiceMonitor(ctx, mc, live, obs)
	}
	return r.applyServiceMonitor(ctx, mc, s, live, obs)
}

// applyServiceMonitor applies the desired ServiceMonitor unless live (nil
// when absent) already holds every field of it.
func (r *Reconciler) applyServiceMonitor(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *unstructured.Unstructured, obs *observation) error {
	desired := desiredServiceMonitor(mc, s)
	_, err := r.applyUnstructured(ctx, mc, desired, live, live != nil && isSubset(desired.Object, live.Object), obs)
	return err
}

// deleteServiceMonitor deletes the owned ServiceMonitor (nil: there is
// none), exactly the one seen as owned.
func (r *Reconciler) deleteServiceMonitor(ctx context.Context, mc *cachev1alpha1.Memcached, live *unstructured.Unstructured, obs *observation) error {
	if live == nil {
		return nil
	}
	uid, rv := live.GetUID(), live.GetResourceVersion()
	if err := r.Client.Delete(ctx, live, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ServiceMonitor: %w", err)
	}
	obs.events.Normal(mc, nil, cachev1alpha1.EventDeleted, "Delete", "Deleted ServiceMonitor %s: it is disabled", mc.Name)
	return nil
}

// desiredServiceMonitor scrapes the exporter port of the Service's pods.
func desiredServiceMonitor(mc *cachev1alpha1.Memcached, s settings) *unstructured.Unstructured {
	endpoint := map[string]any{"port": cachev1alpha1.ExporterPortName, "path": "/metrics"}
	if s.ServiceMonitorInterval != "" {
		endpoint["interval"] = s.ServiceMonitorInterval
	}
	return ownedUnstructured(mc, serviceMonitorGVK, anyMap(s.ServiceMonitorLabels, objectLabels(mc)), map[string]any{
		"selector":          map[string]any{"matchLabels": anyMap(selectorLabels(mc))},
		"namespaceSelector": map[string]any{"matchNames": []any{mc.Namespace}},
		"endpoints":         []any{endpoint},
	})
}
