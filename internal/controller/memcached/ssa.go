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
		if !same {
			// A field the apiserver does not store (one of a feature gate
			// that is off, such as a container's stopSignal) is missing from
			// the live object after every apply. Whether the server keeps it
			// now, only the server can say: a dry run tells, without a write.
			if lacking, err := lacksOnly(want, owned); err != nil {
				return false, fmt.Errorf("comparing with the live object: %w", err)
			} else if lacking {
				same, err = r.applyChangesNothing(ctx, want, live, into)
				if err != nil {
					return false, err
				}
			}
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

// applyChangesNothing reports whether applying want would leave live as it
// is: the answer of a dry-run apply equals live in everything but its
// status and the times of its managed fields (which a dry run stamps anew).
// into is the empty object applyIfChanged decodes into; it stays empty.
func (r *Reconciler) applyChangesNothing(ctx context.Context, want []byte, live, into client.Object) (bool, error) {
	probe, ok := into.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not an object", into)
	}
	probe.SetNamespace(live.GetNamespace())
	probe.SetName(live.GetName())
	if err := r.Client.Patch(ctx, probe, client.RawPatch(types.ApplyPatchType, want), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return false, fmt.Errorf("dry-run apply: %w", err)
	}
	a, err := storedFields(live)
	if err != nil {
		return false, err
	}
	b, err := storedFields(probe)
	if err != nil {
		return false, err
	}
	return equality.Semantic.DeepEqual(a, b), nil
}

// storedFields is o as the apiserver stores it for an apply to compare:
// without its status (an apply of the object never changes it, and the
// cached status may lag the server's), type, resourceVersion and the times
// of its managed fields.
func storedFields(o client.Object) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	delete(u, "apiVersion")
	delete(u, "kind")
	if m, ok := u["metadata"].(map[string]any); ok {
		delete(m, "resourceVersion")
		if entries, ok := m["managedFields"].([]any); ok {
			for _, e := range entries {
				if e, ok := e.(map[string]any); ok {
					delete(e, "time")
				}
			}
		}
	}
	return u, nil
}

// lacksOnly reports whether the owned fields hold want's values except
// for fields want sets that owned lacks: what the live object shows when
// the apiserver dropped fields of the last apply. A value that differs, or
// a field owned but no longer desired, is a change an apply makes.
func lacksOnly(want []byte, owned any) (bool, error) {
	a, b, err := jsonForms(want, owned)
	if err != nil || b == nil {
		return false, err
	}
	return subsumes(a, b), nil
}

// subsumes reports whether every field of have is in want with the same
// value (lists element by element).
func subsumes(want, have any) bool {
	switch h := have.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return false
		}
		for k, hv := range h {
			wv, ok := w[k]
			if !ok || !subsumes(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) != len(h) {
			return false
		}
		for i := range h {
			if !subsumes(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return equality.Semantic.DeepEqual(want, have)
	}
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
	a, b, err := jsonForms(want, owned)
	if err != nil || b == nil {
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

// jsonForms decodes the desired configuration's JSON and the owned fields
// into comparable JSON values; b is nil when nothing is owned.
func jsonForms(want []byte, owned any) (a, b any, err error) {
	if owned == nil {
		return nil, nil, nil
	}
	if err := json.Unmarshal(want, &a); err != nil {
		return nil, nil, err
	}
	if b, err = toJSONValue(owned); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}
