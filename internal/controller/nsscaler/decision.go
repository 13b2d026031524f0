package nsscaler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Action is what the controller does to one workload.
type Action int

const (
	// ActionNone leaves the workload as it is.
	ActionNone Action = iota
	// ActionPark scales the workload to spec.parkedReplicas (or suspends
	// it).
	ActionPark
	// ActionRestore returns it to its recorded original and drops the
	// annotation.
	ActionRestore
)

func (a Action) String() string {
	switch a {
	case ActionPark:
		return "park"
	case ActionRestore:
		return "restore"
	default:
		return "none"
	}
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Record is the original to write along with the park; nil when the
	// workload already carries one (a recorded original is never replaced).
	Record *Original
	// Original is the recorded state a restore returns to.
	Original Original
	// Target is true when the workload belongs parked (it counts in status).
	Target bool
	// ParkAt is the replica count a park sets (a ScaledObject: its pause
	// count; unused for a CronJob).
	ParkAt int32
	// Keep is the replica count the workload keeps once the decision is
	// carried out: ParkAt for a target, its own count for one left at or
	// below spec.parkedReplicas (the pods status.done expects).
	Keep int32
	// AtOrBelow: the workload runs spec.parkedReplicas or fewer (or is
	// being restored to such a count) and is left as it is.
	AtOrBelow bool
}

// Decide is the whole per-workload policy, a pure function of the workload,
// the NSScaler's plan (spec.parkedReplicas n among it), the kinds it parks
// and its name:
//
//   - A target (in a parked namespace, of a parked kind, not controlled by
//     another object, not excluded, not autoscaled by a ScaledObject —
//     which is parked instead —, not in its grace period) is parked to n.
//     Its present state is recorded unless an original is already recorded;
//     a recorded original is kept even when a user scaled the workload up by
//     hand — it is re-parked to n and will be restored to the recorded count
//     (edit the annotation to change it).
//   - A target without a record that already runs n or fewer replicas is
//     left as it is: not written, nothing recorded, so there is nothing to
//     restore and it keeps what it runs. One with a record of n or fewer
//     (n was raised while it was parked) is restored to its record and then
//     left as it is; one with a record above n that runs another count (n
//     was changed) is re-parked to n.
//   - An annotated non-target is restored when this NSScaler owns its
//     namespace (whitelisted, or parked but the kind or the controller
//     reference changed), or when no other NSScaler owns the namespace and
//     this one parked it (the namespace stopped matching, or is protected).
//     An excluded or newly autoscaled workload is restored this way too.
//   - Anything else is left alone; in particular workloads in namespaces
//     another NSScaler owns.
func Decide(w Workload, plan Plan, kinds sets.Set[KindKey], self string) (Decision, error) {
	var orig Original
	if w.HasAnnotation {
		var err error
		if orig, err = DecodeOriginal(w.Annotation); err != nil {
			return Decision{}, err
		}
		if w.Kind.suspends() != (orig.Suspend != nil) || w.Kind.pauses() != (orig.Pause != nil) {
			return Decision{}, fmt.Errorf("annotation %s does not fit kind %s", AnnotationOriginal, w.Kind)
		}
	}
	if isTarget(w, plan, kinds) {
		return decideTarget(w, orig, plan.ParkedReplicas, self), nil
	}
	if !w.HasAnnotation {
		return Decision{}, nil
	}
	if plan.Owns(w.Namespace) || (!plan.Foreign.Has(w.Namespace) && orig.By == self) {
		return Decision{Action: ActionRestore, Original: orig}, nil
	}
	return Decision{Original: orig}, nil
}

// decideTarget decides on a workload that belongs parked, to n replicas.
func decideTarget(w Workload, orig Original, n int32, self string) Decision {
	at := w.parkCount(n)
	switch {
	case !w.HasAnnotation && w.atOrBelow(n):
		return Decision{Keep: w.Replicas, AtOrBelow: true}
	case !w.HasAnnotation:
		rec := w.current(self)
		return Decision{Action: ActionPark, Record: &rec, Target: true, ParkAt: at, Keep: at}
	case orig.Replicas != nil && *orig.Replicas <= n:
		return Decision{Action: ActionRestore, Original: orig, Keep: *orig.Replicas, AtOrBelow: true}
	case !w.isParked(n):
		return Decision{Action: ActionPark, Original: orig, Target: true, ParkAt: at, Keep: at}
	default:
		return Decision{Action: ActionNone, Original: orig, Target: true, ParkAt: at, Keep: at}
	}
}

// isTarget: the workload belongs parked. A ScaledObject is a target when
// the kind of the workload it scales is listed.
func isTarget(w Workload, plan Plan, kinds sets.Set[KindKey]) bool {
	return plan.Parked.Has(w.Namespace) && kinds.Has(w.parkKind()) && !w.Controlled && !w.Excluded && !w.Autoscaled && !w.InGrace
}
