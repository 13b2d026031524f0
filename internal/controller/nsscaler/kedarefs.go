package nsscaler

import (
	"context"
)

// kedaRefs is what ScaledObjects and the workloads they autoscale need to
// know of each other before either is decided.
type kedaRefs struct {
	// scaledObjects are every ScaledObject, listed first (they are few).
	scaledObjects []Workload
	err           error
	// autoscaled are the workloads a ScaledObject targets; excluded those
	// of them an exclusion applies to.
	autoscaled, excluded map[targetRef]struct{}
	// replicas are what the autoscaled workloads run (a ScaledObject is
	// paused at no more).
	replicas map[targetRef]int32
}

// kedaReferences lists the ScaledObjects and, when there are any, finds
// which of their targets are excluded (a ScaledObject whose workload is
// excluded is left alone too).
func (r *Reconciler) kedaReferences(ctx context.Context, p *workloadPass, handlers []kindHandler) *kedaRefs {
	refs := &kedaRefs{}
	for _, h := range handlers {
		if h.key() == kindScaledObject {
			refs.err = r.eachFresh(ctx, h, func(w Workload) { refs.scaledObjects = append(refs.scaledObjects, w) })
		}
	}
	refs.autoscaled = scaledObjectTargets(refs.scaledObjects)
	if len(refs.autoscaled) == 0 {
		return refs
	}
	refs.excluded = map[targetRef]struct{}{}
	refs.replicas = map[targetRef]int32{}
	for _, h := range handlers {
		if h.key() == kindScaledObject {
			continue
		}
		// A kind that cannot be listed is reported when it is decided on.
		_ = r.eachFresh(ctx, h, func(w Workload) {
			ref := refOf(w)
			if _, ok := refs.autoscaled[ref]; !ok || !p.plan.Owns(w.Namespace) {
				return
			}
			refs.replicas[ref] = w.Replicas
			if excludedBy(w, p.excludeSelector, p.now).excluded {
				refs.excluded[ref] = struct{}{}
			}
		})
	}
	return refs
}
