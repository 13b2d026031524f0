package nsscaler

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workloadPatcher sends the controller's workload writes: JSON merge patches
// of a field or two, with the controller's field manager.
type workloadPatcher struct {
	client client.Client
	owner  client.FieldOwner
}

func newWorkloadPatcher(c client.Client) workloadPatcher {
	return workloadPatcher{client: c, owner: client.FieldOwner(FieldManager)}
}

// patch merge-patches obj (which names the workload) with body; obj then
// holds the apiserver's answer.
func (p workloadPatcher) patch(ctx context.Context, obj client.Object, body []byte) error {
	return p.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), p.owner)
}

// patchScale merge-patches obj's scale subresource with body.
func (p workloadPatcher) patchScale(ctx context.Context, obj client.Object, body []byte) error {
	return p.client.SubResource("scale").Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), p.owner)
}

// mergePatch builds a JSON merge patch that sets (value non-nil) or removes
// (value nil) the annotation, sets spec fields, and, when resourceVersion is
// set, makes the apiserver refuse the write with 409 if the object changed
// since it was read.
func mergePatch(resourceVersion string, annotation *string, removeAnnotation bool, spec map[string]any) []byte {
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	switch {
	case annotation != nil:
		meta["annotations"] = map[string]any{AnnotationOriginal: *annotation}
	case removeAnnotation:
		meta["annotations"] = map[string]any{AnnotationOriginal: nil}
	}
	body := map[string]any{}
	if len(meta) > 0 {
		body["metadata"] = meta
	}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	return mustJSON(body)
}

// mustJSON encodes a patch body of plain values.
func mustJSON(body map[string]any) []byte {
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("encoding merge patch: %v", err)) // maps of plain values always marshal
	}
	return b
}
