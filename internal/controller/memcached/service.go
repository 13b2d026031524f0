package memcached

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// reconcileService applies the headless Service (unless it is foreign or
// the spec invalid) and reads the ready servers from its EndpointSlices.
// It returns the Service as it was before the apply (nil when absent).
func (r *Reconciler) reconcileService(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) (*corev1.Service, error) {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	svc, err := getLive(ctx, r.Client, key, &corev1.Service{})
	if err != nil {
		return nil, fmt.Errorf("reading Service %s: %w", key, err)
	}
	switch {
	case svc != nil && !metav1.IsControlledBy(svc, mc):
		obs.foreign = append(obs.foreign, describeForeign("Service", svc, mc))
	case apply:
		if err := r.applyService(ctx, mc, s, svc, obs); err != nil {
			return nil, err
		}
		obs.serviceName = mc.Name
	case svc != nil:
		obs.serviceName = mc.Name
	}
	if obs.serviceName != "" {
		if obs.servers, err = readyServers(ctx, r.Client, s.Kind, mc.Namespace, obs.serviceName); err != nil {
			return nil, err
		}
	}
	return svc, nil
}

// applyService applies the desired Service over live (nil when absent),
// first removing the ports that would make the apply fail.
func (r *Reconciler) applyService(ctx context.Context, mc *cachev1alpha1.Memcached, s settings, live *corev1.Service, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	desired := desiredService(mc, s)
	var cached client.Object
	if live != nil {
		fixed, err := r.removeClashingPorts(ctx, live, desired)
		if err != nil {
			return fmt.Errorf("repairing ports of Service %s: %w", key, err)
		}
		if fixed {
			obs.events.Normal(mc, nil, cachev1alpha1.EventDriftCorrected, "Update", "Removed ports of Service %s that reuse the names of its own ports", mc.Name)
		}
		cached = live
	}
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), built(desired), cached, &corev1.Service{}, func() (any, error) { return corev1ac.ExtractService(live, FieldManager) })
	if err != nil {
		return fmt.Errorf("applying Service %s: %w", key, err)
	}
	r.eventForApply(mc, obs, "Service", live == nil, applied)
	return nil
}

// desiredService is the headless Service that resolves to the ready
// instances (clients and status.servers use its EndpointSlices).
func desiredService(mc *cachev1alpha1.Memcached, s settings) *corev1ac.ServiceApplyConfiguration {
	ports := []*corev1ac.ServicePortApplyConfiguration{
		corev1ac.ServicePort().WithName(cachev1alpha1.MemcachedPortName).WithProtocol(corev1.ProtocolTCP).
			WithPort(cachev1alpha1.MemcachedPort).WithTargetPort(intstr.FromString(cachev1alpha1.MemcachedPortName)),
	}
	if s.Exporter {
		ports = append(ports, corev1ac.ServicePort().WithName(cachev1alpha1.ExporterPortName).WithProtocol(corev1.ProtocolTCP).
			WithPort(cachev1alpha1.ExporterPort).WithTargetPort(intstr.FromString(cachev1alpha1.ExporterPortName)))
	}
	svc := corev1ac.Service(mc.Name, mc.Namespace)
	if a := serviceAnnotations(s); len(a) > 0 {
		svc.WithAnnotations(a)
	}
	return svc.
		WithLabels(objectLabels(mc)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			// Only ready instances are published (publishNotReadyAddresses
			// stays false, its default; a false bool cannot be read back
			// from the managed fields, so it is not set explicitly).
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(selectorLabels(mc)).
			WithPorts(ports...))
}

// Annotations on the Service saying what its clients must speak.
const (
	// AnnotationTLS "true": connections must use TLS (spec.tls).
	AnnotationTLS = "cache.runbook.dev/tls"
	// AnnotationMutualTLS "true": clients must present a certificate.
	AnnotationMutualTLS = "cache.runbook.dev/mutual-tls"
	// AnnotationAuth "true": clients must authenticate (spec.auth).
	AnnotationAuth = "cache.runbook.dev/auth"
)

func serviceAnnotations(s settings) map[string]string {
	a := map[string]string{}
	if s.ServiceMonitor {
		a[AnnotationServiceMonitor] = "true"
	}
	if s.TLS != nil {
		a[AnnotationTLS] = "true"
		if s.TLS.ClientCA != nil {
			a[AnnotationMutualTLS] = "true"
		}
	}
	if s.Auth != nil {
		a[AnnotationAuth] = "true"
	}
	return a
}

// removeClashingPorts deletes the Service ports that someone else set with
// the name of one of the controller's ports but another port number or
// protocol. Server-side apply cannot remove them (they belong to another
// field manager) and the apiserver rejects a Service with two ports of one
// name, so without this a manual port edit would block the Service forever.
// Other added ports are left alone. The JSON patch is guarded by the
// resourceVersion: it removes exactly what was looked at. It reports whether
// it patched; svc is updated in place.
func (r *Reconciler) removeClashingPorts(ctx context.Context, svc *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) (bool, error) {
	want := map[string]corev1.ServicePort{}
	for _, p := range desired.Spec.Ports {
		want[*p.Name] = corev1.ServicePort{Name: *p.Name, Port: *p.Port, Protocol: *p.Protocol}
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": svc.ResourceVersion}}
	for i := len(svc.Spec.Ports) - 1; i >= 0; i-- {
		p := svc.Spec.Ports[i]
		w, ours := want[p.Name]
		if ours && (p.Port != w.Port || p.Protocol != w.Protocol) {
			ops = append(ops, map[string]any{"op": "remove", "path": fmt.Sprintf("/spec/ports/%d", i)})
		}
	}
	if len(ops) == 1 {
		return false, nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return false, err
	}
	if err := r.Client.Patch(ctx, svc, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return false, err
	}
	return true, nil
}
