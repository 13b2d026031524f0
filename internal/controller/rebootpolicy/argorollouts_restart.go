package rebootpolicy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// rolloutRestartPatch is the merge patch `kubectl argo rollouts restart`
// makes — spec.restartAt and nothing else of the spec, so that the
// Rollout controller, which owns the template, the replicas and the
// status, has nothing to fight over — plus the restart id on the
// Rollout's metadata. The resourceVersion is a precondition, as for the
// built-in kinds (see restartPatch).
func rolloutRestartPatch(at time.Time, resourceVersion, id string) client.Patch {
	body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}},"spec":{"restartAt":%q}}`,
		resourceVersion, autorebootv1alpha1.RestartIDAnnotation, id, rolloutRestartStamp(at))
	return client.RawPatch(types.MergePatchType, []byte(body))
}

// rolloutRestartStamp is whole seconds: spec.restartAt is a metav1.Time,
// and the Rollout controller replaces the pods created before it, compared
// at the second.
func rolloutRestartStamp(at time.Time) string {
	return at.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// restartRollout sets the Rollout's spec.restartAt and returns the time
// it set. A restart in the same second as the previous one asks for the
// next second: the same value would restart nothing.
func (r *Reconciler) restartRollout(ctx context.Context, t targetInfo, now time.Time, id string) (time.Time, error) {
	at := now.UTC().Truncate(time.Second)
	if !t.restartedAt.IsZero() && !at.After(t.restartedAt) {
		at = t.restartedAt.Truncate(time.Second).Add(time.Second)
	}
	if err := r.Client.Patch(ctx, t.obj, rolloutRestartPatch(at, t.obj.GetResourceVersion(), id), client.FieldOwner(FieldManager)); err != nil {
		return at, fmt.Errorf("restart %s %s/%s: %w", t.kind, t.obj.GetNamespace(), t.obj.GetName(), err)
	}
	return at, nil
}
