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
	// ActionPark scales the workload to zero (or suspends it).
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
}

// Decide is the whole per-workload policy, a pure function of the workload,
// the NSScaler's plan, the kinds it parks and its name:
//
//   - A target (in a parked namespace, of a parked kind, not controlled by
//     another object, not excluded, not autoscaled by a ScaledObject —
//     which is parked instead) is parked. Its present state is recorded unless an
//     original is already recorded; a recorded original is kept even when a
//     user scaled the workload up by hand — it is re-parked to zero and will
//     be restored to the recorded count (edit the annotation to change it).
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
	target := isTarget(w, plan, kinds)
	if target {
		switch {
		case !w.HasAnnotation:
			rec := w.current(self)
			return Decision{Action: ActionPark, Record: &rec, Target: true}, nil
		case !w.isParked():
			return Decision{Action: ActionPark, Original: orig, Target: true}, nil
		default:
			return Decision{Action: ActionNone, Original: orig, Target: true}, nil
		}
	}
	if !w.HasAnnotation {
		return Decision{}, nil
	}
	if plan.Owns(w.Namespace) || (!plan.Foreign.Has(w.Namespace) && orig.By == self) {
		return Decision{Action: ActionRestore, Original: orig}, nil
	}
	return Decision{Original: orig}, nil
}

// isTarget: the workload belongs parked. A ScaledObject is a target when
// the kind of the workload it scales is listed.
func isTarget(w Workload, plan Plan, kinds sets.Set[KindKey]) bool {
	return plan.Parked.Has(w.Namespace) && kinds.Has(w.parkKind()) && !w.Controlled && !w.Excluded && !w.Autoscaled
}
