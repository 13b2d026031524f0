package nsscaler

import (
	"cmp"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/weekly"
)

// Schedule is a parsed spec.schedule: the weekly windows (internal/weekly,
// shared with RebootPolicy) under the NSScaler's own exceptions. Its
// methods are pure functions of the instant they are given.
type Schedule struct {
	windows    *weekly.Schedule
	loc        *time.Location
	exceptions []exception
}

// exception forces a phase during [from, until).
type exception struct {
	name        string
	from, until time.Time
	phase       scalingv1alpha1.Phase
}

// Verdict is the schedule's phase at an instant and why.
type Verdict struct {
	Phase scalingv1alpha1.Phase
	// Reason says it in words, e.g. "sleep window Mon-Fri 20:00-08:00
	// (Europe/Berlin)".
	Reason string
	// Exception is the exception in force, nil when the windows decide.
	Exception *scalingv1alpha1.ActiveException
}

// ParseSchedule checks and parses a schedule. Errors name the field.
func ParseSchedule(s *scalingv1alpha1.Schedule) (*Schedule, error) {
	windows, err := weekly.Parse(s.Schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule.%w", err)
	}
	out := &Schedule{windows: windows, loc: windows.Location()}
	for i, e := range s.Exceptions {
		pe, err := parseException(e, out.loc, i)
		if err != nil {
			return nil, fmt.Errorf("schedule.exceptions[%d]: %w", i, err)
		}
		out.exceptions = append(out.exceptions, pe)
	}
	return out, nil
}

// parseBound reads an RFC 3339 time or a date; a date is the start of that
// day in loc, or, for an end (until), the start of the next day.
func parseBound(s string, loc *time.Location, end bool) (time.Time, error) {
	if len(s) == len(time.DateOnly) {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
		}
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return weekly.Instant(d.Year(), d.Month(), d.Day(), 0, loc), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a date", s)
	}
	return t, nil
}

func parseException(e scalingv1alpha1.ScheduleException, loc *time.Location, i int) (exception, error) {
	from, err := parseBound(e.From, loc, false)
	if err != nil {
		return exception{}, fmt.Errorf("from: %w", err)
	}
	until, err := parseBound(e.Until, loc, true)
	if err != nil {
		return exception{}, fmt.Errorf("until: %w", err)
	}
	if !until.After(from) {
		return exception{}, fmt.Errorf("until %s is not after from %s", e.Until, e.From)
	}
	if e.Phase != scalingv1alpha1.PhaseAsleep && e.Phase != scalingv1alpha1.PhaseAwake {
		return exception{}, fmt.Errorf("phase %q: use Asleep or Awake", e.Phase)
	}
	return exception{name: cmp.Or(e.Name, fmt.Sprintf("#%d", i)), from: from, until: until, phase: e.Phase}, nil
}

// At is the phase at t: the first exception covering t decides, else
// Asleep inside a sleep window and Awake outside all of them.
func (s *Schedule) At(t time.Time) Verdict {
	for _, e := range s.exceptions {
		if !t.Before(e.from) && t.Before(e.until) {
			return Verdict{
				Phase:     e.phase,
				Reason:    fmt.Sprintf("exception %s (%s) until %s", e.name, e.phase, e.until.In(s.loc).Format(time.RFC3339)),
				Exception: &scalingv1alpha1.ActiveException{Name: e.name, Phase: e.phase, Until: statusTime(e.until)},
			}
		}
	}
	if w, ok := s.windows.WindowAt(t); ok {
		return Verdict{Phase: scalingv1alpha1.PhaseAsleep, Reason: fmt.Sprintf("sleep window %s (%s)", w, s.loc)}
	}
	return Verdict{Phase: scalingv1alpha1.PhaseAwake, Reason: fmt.Sprintf("outside the sleep windows (%s)", s.loc)}
}

// Next is the first instant after t at which the phase differs from
// At(t).Phase; zero when there is none (the phase never changes again,
// e.g. windows covering the whole week and no exception ahead). The phase
// only changes at the start or end of a window occurrence or an exception,
// so those are the candidates; occurrences are taken around t and around
// the end of every exception ahead (a long exception hides the windows
// under it).
func (s *Schedule) Next(t time.Time) time.Time {
	cur := s.At(t).Phase
	return s.firstAfter(t, func(v Verdict) bool { return v.Phase != cur })
}

// NextChange is the first instant after t at which the verdict changes at
// all — its phase, or only its reason: an exception ends inside a sleep
// window, one window hands over to another that touches it. The status
// says why a namespace sleeps, so it is updated then too; zero when
// nothing changes again.
func (s *Schedule) NextChange(t time.Time) time.Time {
	cur := s.At(t)
	return s.firstAfter(t, func(v Verdict) bool { return v.Phase != cur.Phase || v.Reason != cur.Reason })
}

// firstAfter is the first candidate instant after t whose verdict
// satisfies differs.
func (s *Schedule) firstAfter(t time.Time, differs func(Verdict) bool) time.Time {
	for _, c := range s.candidates(t) {
		if differs(s.At(c)) {
			return c
		}
	}
	return time.Time{}
}

// candidates are the instants after t at which the phase may change, in
// order, without duplicates: the bounds of the exceptions, and the window
// boundaries around t and around the end of every exception ahead (a long
// exception hides the windows under it).
func (s *Schedule) candidates(t time.Time) []time.Time {
	var out []time.Time
	add := func(cs ...time.Time) {
		for _, c := range cs {
			if c.After(t) {
				out = append(out, c)
			}
		}
	}
	add(s.windows.Boundaries(t)...)
	for _, e := range s.exceptions {
		add(e.from, e.until)
		if e.until.After(t) {
			add(s.windows.Boundaries(e.until)...)
		}
	}
	return weekly.SortedUnique(out)
}

// statusTime is t as the status stores it: whole seconds in UTC, so that a
// status computed again from the same schedule equals the one written.
func statusTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second).UTC())
}
