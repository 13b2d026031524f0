package memcached

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// ownedWorkload is what tells the two workload kinds apart (the object, its
// desired form, its status); reading, applying and reporting either one is
// the same, in reconcileOwnedWorkload.
type ownedWorkload[W any, P interface {
	*W
	client.Object
}] struct {
	kind    string
	desired func(*cachev1alpha1.Memcached, settings) (runtime.ApplyConfiguration, error)
	// extract gives the fields of live that the controller owns.
	extract func(live P) (any, error)
	state   func(P) *workloadState
	// pods are live's replicas and pod template.
	pods func(live P) (*int32, *corev1.PodTemplateSpec)
}

// reconcileOwnedWorkload applies mc's workload of kind w (unless it is
// foreign or the spec may not be applied) and records the live object for
// the status.
func reconcileOwnedWorkload[W any, P interface {
	*W
	client.Object
}](ctx context.Context, r *Reconciler, w ownedWorkload[W, P], mc *cachev1alpha1.Memcached, s settings, apply bool, obs *observation) error {
	key := types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}
	cur, err := getLive(ctx, r.Client, key, P(new(W)))
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", w.kind, key, err)
	}
	switch {
	case cur != nil && !metav1.IsControlledBy(cur, mc):
		obs.foreign = append(obs.foreign, describeForeign(w.kind, cur, mc))
	case apply:
		live, err := applyOwnedWorkload(ctx, r, w, mc, s, cur, obs)
		if err != nil {
			obs.workload = w.state(cur)
			return fmt.Errorf("applying %s %s: %w", w.kind, key, err)
		}
		obs.workload = w.state(live)
	default:
		obs.workload = w.state(cur)
	}
	return nil
}

// applyOwnedWorkload applies the desired workload and returns the live
// object (live, nil when there is none, if nothing was applied).
func applyOwnedWorkload[W any, P interface {
	*W
	client.Object
}](ctx context.Context, r *Reconciler, w ownedWorkload[W, P], mc *cachev1alpha1.Memcached, s settings, live P, obs *observation) (P, error) {
	// A nil P in a client.Object would not be a nil interface.
	var cached client.Object
	if live != nil {
		cached = live
	}
	after := P(new(W))
	build := func() (runtime.ApplyConfiguration, error) { return w.desired(mc, s) }
	applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), build, cached, after, func() (any, error) { return w.extract(live) })
	if err != nil || !applied {
		return live, err
	}
	if live == nil {
		obs.created = append(obs.created, fmt.Sprintf("%s (%d instances)", w.kind, s.Size))
		return after, nil
	}
	replicas, template := w.pods(live)
	noteSecretRollout(obs, template.Annotations, s)
	r.reportWorkloadChange(mc, obs, s, w.kind, replicas, template.Annotations)
	return after, nil
}
