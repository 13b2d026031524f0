package memcached

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// applyIfChanged server-side applies the desired configuration (built by
// build from in, the Memcached's generation and Secrets) with the
// controller's field manager, taking over fields another manager changed
// (drift correction), unless the controller's fields already hold the
// desired values: a reconcile that changes nothing sends no write. live is
// the object as cached (nil when there is none) and extract gives the
// fields the controller owns on it; extract runs only when the memo does
// not know that this version of live already holds the desired
// configuration, and build only when the memo does not know what in
// builds. An apply's response (the new live object, managedFields
// included) is decoded into into, which must be an empty object of live's
// type, named like the desired object; the memo then knows that version
// without extracting anything. It reports whether it applied.
func (r *Reconciler) applyIfChanged(ctx context.Context, in desiredInputs, build func() (runtime.ApplyConfiguration, error), live, into client.Object, extract func() (any, error)) (bool, error) {
	if live != nil {
		if hash, ok := r.applied.desiredHash(keyOf(live), in); ok && r.applied.holds(live, hash) {
			return false, nil
		}
	}
	desired, err := build()
	if err != nil {
		return false, err
	}
	meta, ok := desired.(objectMetaOf)
	if !ok {
		return false, fmt.Errorf("%T has no object metadata", desired)
	}
	want, hash, err := desiredJSON(desired)
	if err != nil {
		return false, fmt.Errorf("encoding the desired object: %w", err)
	}
	r.applied.noteDesired(keyFor(into, ptr.Deref(meta.GetNamespace(), ""), ptr.Deref(meta.GetName(), "")), in, hash)
	if live != nil {
		if r.applied.holds(live, hash) {
			return false, nil
		}
		owned, err := extract()
		if err != nil {
			return false, fmt.Errorf("extracting owned fields: %w", err)
		}
		same, err := sameApplyConfiguration(want, owned)
		if err != nil {
			return false, fmt.Errorf("comparing with the live object: %w", err)
		}
		if same {
			r.applied.record(live, hash)
			return false, nil
		}
		if logger := log.FromContext(ctx).V(2); logger.Enabled() {
			have, _ := json.Marshal(owned)
			logger.Info("owned fields differ from the spec; applying", "desired", string(want), "owned", string(have))
		}
	}
	// The desired object's JSON is the apply patch as is; the typed
	// client decodes the answer (protobuf for built-in kinds) into into.
	into.SetNamespace(ptr.Deref(meta.GetNamespace(), ""))
	into.SetName(ptr.Deref(meta.GetName(), ""))
	if err := r.Client.Patch(ctx, into, client.RawPatch(types.ApplyPatchType, want), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, err
	}
	r.applied.record(into, hash)
	return true, nil
}

// inputsOf are the inputs of mc's desired objects under s.
func inputsOf(mc *cachev1alpha1.Memcached, s settings) desiredInputs {
	return desiredInputs{uid: mc.UID, generation: mc.Generation, secretHash: s.SecretHash}
}

// built adapts a configuration already built to applyIfChanged.
func built[T runtime.ApplyConfiguration](c T) func() (runtime.ApplyConfiguration, error) {
	return func() (runtime.ApplyConfiguration, error) { return c, nil }
}

// objectMetaOf is implemented by every typed apply configuration.
type objectMetaOf interface {
	GetName() *string
	GetNamespace() *string
}

// sameApplyConfiguration reports whether the fields this controller owns on
// the live object (owned, extracted from its managedFields) already hold the
// desired values (want: the desired configuration's JSON). Both sides are
// compared in their JSON form, which is what the apiserver would receive.
func sameApplyConfiguration(want []byte, owned any) (bool, error) {
	if owned == nil {
		return false, nil
	}
	var a any
	if err := json.Unmarshal(want, &a); err != nil {
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
