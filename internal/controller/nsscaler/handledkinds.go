package nsscaler

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// kindsOf is the set of kinds the spec parks.
func kindsOf(spec scalingv1alpha1.NSScalerSpec) sets.Set[KindKey] {
	kinds := sets.New[KindKey]()
	for _, k := range spec.Kinds {
		kinds.Insert(kindKeyOf(k))
	}
	return kinds
}

// handlers returns the built-in handlers and those of the custom-resource
// kinds in the spec or still parked; kinds that are not available are
// reported in obs.
func (r *Reconciler) handlers(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) []kindHandler {
	hs := slices.Clone(r.builtins)
	custom := sets.New[KindKey]()
	for _, k := range scaler.Spec.Kinds {
		if k.Group != "" {
			custom.Insert(kindKeyOf(k))
		}
	}
	obs.previouslyParked = sets.New[KindKey]()
	for _, k := range scaler.Status.ParkedKinds {
		custom.Insert(kindKeyOf(k))
		obs.previouslyParked.Insert(kindKeyOf(k))
	}
	if r.dynamic == nil {
		return hs
	}
	// KEDA ScaledObjects, where they are served: the workloads they
	// autoscale are parked through them.
	custom.Insert(kindScaledObject)
	keys := custom.UnsortedList()
	slices.SortFunc(keys, func(a, b KindKey) int { return cmp.Compare(a.String(), b.String()) })
	for _, k := range keys {
		h, err := r.dynamic.handler(ctx, k)
		switch {
		case err == nil:
			hs = append(hs, h)
		case k == kindScaledObject && meta.IsNoMatchError(err) && !obs.previouslyParked.Has(k):
			// KEDA is not installed: nothing to do, nothing to report.
		case k == kindScaledObject && errors.Is(err, errNotSynced):
			// Until the ScaledObjects are known, a park could scale a
			// workload KEDA owns; the sync's end reconciles again.
			obs.kindUnhandled(k, err)
			obs.holdParks = true
		default:
			obs.kindUnhandled(k, err)
		}
	}
	return hs
}

// nudgeAll queues every NSScaler (a run-time kind became available or
// failed).
func (r *Reconciler) nudgeAll() {
	var l scalingv1alpha1.NSScalerList
	if err := r.client.List(context.Background(), &l, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range l.Items {
		r.wakeups.nudge(l.Items[i].Name)
	}
}
