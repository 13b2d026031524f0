package cache

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// sameApplyConfiguration reports whether the fields this controller owns on
// the live object (owned, extracted from its managedFields) already hold the
// desired values. Both sides are compared in their JSON form, which is what
// the apiserver would receive.
func sameApplyConfiguration(desired, owned any) (bool, error) {
	if owned == nil {
		return false, nil
	}
	a, err := toJSONValue(desired)
	if err != nil {
		return false, err
	}
	b, err := toJSONValue(owned)
	if err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(a, b), nil
}

func toJSONValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// applyIfChanged server-side applies desired with the controller's field
// manager, taking over fields another manager changed (drift correction),
// unless the controller's fields already hold the desired values: a
// reconcile that changes nothing sends no write. It reports whether it
// applied.
func (r *Reconciler) applyIfChanged(ctx context.Context, desired runtime.ApplyConfiguration, owned any) (bool, error) {
	same, err := sameApplyConfiguration(desired, owned)
	if err != nil {
		return false, fmt.Errorf("comparing with the live object: %w", err)
	}
	if same {
		return false, nil
	}
	if logger := log.FromContext(ctx).V(2); logger.Enabled() {
		want, _ := json.Marshal(desired)
		have, _ := json.Marshal(owned)
		logger.Info("owned fields differ from the spec; applying", "desired", string(want), "owned", string(have))
	}
	if err := r.Client.Apply(ctx, desired, client.FieldOwner(r.fieldManager()), client.ForceOwnership); err != nil {
		return false, err
	}
	return true, nil
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
	if err := r.Client.Patch(ctx, svc, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(r.fieldManager())); err != nil {
		return false, err
	}
	return true, nil
}
