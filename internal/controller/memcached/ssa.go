package memcached

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

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
	if err := r.Client.Apply(ctx, desired, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, err
	}
	return true, nil
}

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

// convertInto copies a typed API value into its apply configuration (or an
// apply response back into the typed object). Both share one JSON shape, so
// a JSON round trip is exact.
func convertInto[T any](in any, out *T) (*T, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}
