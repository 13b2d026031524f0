package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

// wakeEdit changes the NSScaler s (a fresh copy) for namespace ns at now;
// it returns what happened, in words, and whether s changed.
type wakeEdit func(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (msg string, changed bool, err error)

func (o *wakeOptions) wake(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	until := now.Add(o.forD).Truncate(time.Second)
	setWake(s, ns, until, now)
	return fmt.Sprintf("namespace %s runs until %s (in %s): NSScaler %s, spec.wake", ns, until.UTC().Format(time.RFC3339), shortDuration(until.Sub(now)), s.Name), true, nil
}

func (o *wakeOptions) park(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	had := slices.IndexFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool { return e.Namespace == ns })
	if had < 0 || !s.Spec.Wake[had].Until.After(now) {
		msg := fmt.Sprintf("namespace %s has no wake entry in force on NSScaler %s: nothing to end", ns, s.Name)
		return msg + awakeNote(s, now), false, nil
	}
	removeWake(s, ns, now)
	return fmt.Sprintf("namespace %s: wake entry removed from NSScaler %s; it is parked again", ns, s.Name) + awakeNote(s, now), true, nil
}

func (o *wakeOptions) unpark(s *scalingv1alpha1.NSScaler, ns string, now time.Time) (string, bool, error) {
	until, why, err := endOfSleep(s, now)
	if err != nil {
		return "", false, err
	}
	if i := slices.IndexFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool { return e.Namespace == ns }); i >= 0 && !s.Spec.Wake[i].Until.Time.Before(until) {
		return fmt.Sprintf("namespace %s already runs until %s (spec.wake of NSScaler %s), past the end of this sleep (%s): nothing to change",
			ns, s.Spec.Wake[i].Until.UTC().Format(time.RFC3339), s.Name, until.UTC().Format(time.RFC3339)), false, nil
	}
	setWake(s, ns, until, now)
	return fmt.Sprintf("namespace %s runs until %s (in %s), when NSScaler %s's schedule wakes anyway (now: %s)",
		ns, until.UTC().Format(time.RFC3339), shortDuration(until.Sub(now)), s.Name, why), true, nil
}

// endOfSleep is when the NSScaler's schedule next turns Awake, from a sleep
// it is in at now; it is computed as the controller computes it.
func endOfSleep(s *scalingv1alpha1.NSScaler, now time.Time) (time.Time, string, error) {
	if s.Spec.Schedule == nil {
		return time.Time{}, "", fmt.Errorf("NSScaler %s has no schedule: its namespaces sleep all the time, so no sleep ends to wake until; use `kubectl runbook wake NAMESPACE --for DURATION`", s.Name)
	}
	sched, err := nsscaler.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("NSScaler %s: %w", s.Name, err)
	}
	v := sched.At(now)
	if v.Phase != scalingv1alpha1.PhaseAsleep {
		return time.Time{}, "", fmt.Errorf("NSScaler %s's schedule is awake now (%s): its namespaces run already; nothing to unpark", s.Name, v.Reason)
	}
	next := sched.Next(now)
	if next.IsZero() {
		return time.Time{}, "", fmt.Errorf("NSScaler %s's schedule never wakes again (%s); use `kubectl runbook wake NAMESPACE --for DURATION`", s.Name, v.Reason)
	}
	return next.Truncate(time.Second), v.Reason, nil
}

// awakeNote says, after a park, that the schedule lets the namespace run
// for now anyway.
func awakeNote(s *scalingv1alpha1.NSScaler, now time.Time) string {
	if s.Spec.Schedule == nil {
		return ""
	}
	sched, err := nsscaler.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		return ""
	}
	if v := sched.At(now); v.Phase == scalingv1alpha1.PhaseAwake {
		note := fmt.Sprintf("\nnote: the schedule is awake now (%s), so the namespace runs", v.Reason)
		if next := sched.Next(now); !next.IsZero() {
			note += " until " + next.UTC().Format(time.RFC3339)
		}
		return note
	}
	return ""
}

// setWake sets ns's entry to until and drops the expired entries of other
// namespaces (the controller ignores them; dropping them keeps the list
// under its 256 entries).
func setWake(s *scalingv1alpha1.NSScaler, ns string, until, now time.Time) {
	removeWake(s, ns, now)
	s.Spec.Wake = append(s.Spec.Wake, scalingv1alpha1.WakeEntry{Namespace: ns, Until: metav1.NewTime(until.UTC())})
	slices.SortFunc(s.Spec.Wake, func(a, b scalingv1alpha1.WakeEntry) int { return strings.Compare(a.Namespace, b.Namespace) })
}

func removeWake(s *scalingv1alpha1.NSScaler, ns string, now time.Time) {
	s.Spec.Wake = slices.DeleteFunc(s.Spec.Wake, func(e scalingv1alpha1.WakeEntry) bool {
		return e.Namespace == ns || !e.Until.After(now)
	})
}
