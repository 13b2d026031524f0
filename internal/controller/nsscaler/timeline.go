package nsscaler

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// moment is what time says about one NSScaler now: the schedule's phase
// (Asleep all the time without a schedule), the wake entries in force, and
// when that next changes.
type moment struct {
	verdict Verdict
	// schedule is nil without spec.schedule (or when it is invalid).
	schedule *Schedule
	// err is an invalid schedule: nothing may be acted on.
	err error
	// woken are the wake entries in force, by namespace.
	woken map[string]time.Time
}

// noScheduleReason is the reason of the phase of an NSScaler without a
// schedule.
const noScheduleReason = "no schedule: parked while selected"

// momentAt evaluates spec.schedule and spec.wake at now. Pure.
func momentAt(spec scalingv1alpha1.NSScalerSpec, now time.Time) moment {
	m := moment{woken: map[string]time.Time{}}
	for _, e := range spec.Wake {
		if e.Until.After(now) {
			m.woken[e.Namespace] = e.Until.Time
		}
	}
	if spec.Schedule == nil {
		m.verdict = Verdict{Phase: scalingv1alpha1.PhaseAsleep, Reason: noScheduleReason}
		return m
	}
	s, err := ParseSchedule(spec.Schedule)
	if err != nil {
		m.err = err
		m.verdict = Verdict{Phase: scalingv1alpha1.PhaseAsleep, Reason: "invalid schedule: " + err.Error()}
		return m
	}
	m.schedule = s
	m.verdict = s.At(now)
	return m
}

func (m moment) asleep() bool { return m.verdict.Phase == scalingv1alpha1.PhaseAsleep }

// wokenSet is the set of namespaces with a wake entry in force.
func (m moment) wokenSet() sets.Set[string] {
	s := sets.New[string]()
	for ns := range m.woken {
		s.Insert(ns)
	}
	return s
}

// phaseAt is the schedule's phase at t (Asleep without a schedule).
func (m moment) phaseAt(t time.Time) scalingv1alpha1.Phase {
	if m.schedule == nil {
		return scalingv1alpha1.PhaseAsleep
	}
	return m.schedule.At(t).Phase
}

// nextTransition is the first instant after now at which what the plan
// parks changes: the schedule's next transition, or the end of the wake
// entry of a namespace the plan keeps running for it, if that falls while
// the schedule says Asleep. Zero when nothing is due.
func (m moment) nextTransition(now time.Time, plan Plan) time.Time {
	var next time.Time
	if m.schedule != nil {
		next = m.schedule.Next(now)
	}
	for ns, until := range m.woken {
		if !plan.Owns(ns) || m.phaseAt(until) != scalingv1alpha1.PhaseAsleep {
			continue
		}
		next = earliest(next, until)
	}
	return next
}

// nextChange is when what the status says about the schedule (its phase,
// reason, active exception) next changes, even where what is parked does
// not; zero when never (or without a schedule).
func (m moment) nextChange(now time.Time) time.Time {
	if m.schedule == nil {
		return time.Time{}
	}
	return m.schedule.NextChange(now)
}

// wakeEntries lists the wake entries in force for status, sorted.
func (m moment) wakeEntries() []scalingv1alpha1.WakeEntry {
	var out []scalingv1alpha1.WakeEntry
	for ns, until := range m.woken {
		out = append(out, scalingv1alpha1.WakeEntry{Namespace: ns, Until: statusTime(until)})
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.WakeEntry) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}

// wakeUntils are the ends of the wake entries in force: the status lists
// them, so it changes when one ends.
func (m moment) wakeUntils() []time.Time {
	out := make([]time.Time, 0, len(m.woken))
	for _, u := range m.woken {
		out = append(out, u)
	}
	return out
}

// earliest is the earlier of a and b, ignoring zero times.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
