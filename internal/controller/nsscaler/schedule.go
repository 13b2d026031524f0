package nsscaler

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	// The manager's image may carry no zoneinfo: the schedule's time zones
	// come from the binary's own copy of the IANA database.
	_ "time/tzdata"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// Schedule is a parsed spec.schedule. Its methods are pure functions of the
// instant they are given.
type Schedule struct {
	loc        *time.Location
	windows    []window
	exceptions []exception
}

// window is a sleep window: it starts on the wall-clock days it lists at
// from and ends at to, on the next day when to is not after from.
type window struct {
	days     [7]bool // by time.Weekday
	from, to time.Duration
	text     string
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
	zone := cmp.Or(s.TimeZone, "UTC")
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return nil, fmt.Errorf("schedule.timeZone %q is not a known IANA time zone", zone)
	}
	out := &Schedule{loc: loc}
	for i, w := range s.Sleep {
		pw, err := parseWindow(w)
		if err != nil {
			return nil, fmt.Errorf("schedule.sleep[%d]: %w", i, err)
		}
		out.windows = append(out.windows, pw)
	}
	for i, e := range s.Exceptions {
		pe, err := parseException(e, loc, i)
		if err != nil {
			return nil, fmt.Errorf("schedule.exceptions[%d]: %w", i, err)
		}
		out.exceptions = append(out.exceptions, pe)
	}
	return out, nil
}

var weekdays = map[string]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// parseDays reads "Mon-Fri", "Sat,Sun", "Fri-Mon" (a range wraps over the
// week's end).
func parseDays(s string) ([7]bool, error) {
	var days [7]bool
	for part := range strings.SplitSeq(s, ",") {
		first, last, isRange := strings.Cut(part, "-")
		if !isRange {
			last = first
		}
		a, okA := weekdays[first]
		b, okB := weekdays[last]
		if !okA || !okB {
			return days, fmt.Errorf("days %q: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, lists (Sat,Sun) and ranges (Mon-Fri)", s)
		}
		for d := a; ; d = (d + 1) % 7 {
			days[d] = true
			if d == b {
				break
			}
		}
	}
	return days, nil
}

// parseTimeOfDay reads HH:MM or HH:MM:SS (24:00 is the end of the day).
func parseTimeOfDay(s string) (time.Duration, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("time %q: use HH:MM or HH:MM:SS", s)
	}
	var fields [3]int
	limits := [3]int{24, 59, 59}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || n < 0 || n > limits[i] {
			return 0, fmt.Errorf("time %q: use HH:MM or HH:MM:SS", s)
		}
		fields[i] = n
	}
	d := time.Duration(fields[0])*time.Hour + time.Duration(fields[1])*time.Minute + time.Duration(fields[2])*time.Second
	if d > 24*time.Hour {
		return 0, fmt.Errorf("time %q is after 24:00", s)
	}
	return d, nil
}

func parseWindow(w scalingv1alpha1.SleepWindow) (window, error) {
	days, err := parseDays(w.Days)
	if err != nil {
		return window{}, err
	}
	from, err := parseTimeOfDay(w.From)
	if err != nil {
		return window{}, fmt.Errorf("from: %w", err)
	}
	to, err := parseTimeOfDay(w.To)
	if err != nil {
		return window{}, fmt.Errorf("to: %w", err)
	}
	if from == to || from == 24*time.Hour {
		return window{}, fmt.Errorf("from %s to %s is no window", w.From, w.To)
	}
	return window{days: days, from: from, to: to, text: fmt.Sprintf("%s %s-%s", w.Days, w.From, w.To)}, nil
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
		return instantOf(d, loc), nil
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

// instance is one occurrence of a window: [start, end).
type instance struct{ start, end time.Time }

// instanceOn is the occurrence of w that starts on the wall date day;
// ok is false when w does not start on that weekday.
func (s *Schedule) instanceOn(w window, day wallTime) (instance, bool) {
	if !w.days[day.Weekday()] {
		return instance{}, false
	}
	end := day.Add(w.to)
	if w.to <= w.from {
		end = end.AddDate(0, 0, 1)
	}
	return instance{start: instantOf(day.Add(w.from), s.loc), end: instantOf(end, s.loc)}, true
}

// localDay is the wall date of t in the schedule's zone, offset by n days.
func (s *Schedule) localDay(t time.Time, n int) wallTime {
	w := wallOf(t, s.loc)
	return wallDate(w.Year(), w.Month(), w.Day()+n)
}

// windowAt returns the window whose occurrence contains t. A window lasts
// at most a wall-clock day, so only those that started on t's date or the
// two dates before can.
func (s *Schedule) windowAt(t time.Time) (window, bool) {
	for _, w := range s.windows {
		for n := -2; n <= 0; n++ {
			if in, ok := s.instanceOn(w, s.localDay(t, n)); ok && !t.Before(in.start) && t.Before(in.end) {
				return w, true
			}
		}
	}
	return window{}, false
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
	if w, ok := s.windowAt(t); ok {
		return Verdict{Phase: scalingv1alpha1.PhaseAsleep, Reason: fmt.Sprintf("sleep window %s (%s)", w.text, s.loc)}
	}
	return Verdict{Phase: scalingv1alpha1.PhaseAwake, Reason: fmt.Sprintf("outside the sleep windows (%s)", s.loc)}
}

// horizonDays is how many days of window occurrences Next looks at after
// now and after the end of each exception: a schedule repeats weekly.
const horizonDays = 8

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
// order, without duplicates.
func (s *Schedule) candidates(t time.Time) []time.Time {
	var out []time.Time
	add := func(c time.Time) {
		if c.After(t) {
			out = append(out, c)
		}
	}
	around := []time.Time{t}
	for _, e := range s.exceptions {
		add(e.from)
		add(e.until)
		if e.until.After(t) {
			around = append(around, e.until)
		}
	}
	for _, a := range around {
		for n := -2; n <= horizonDays; n++ {
			day := s.localDay(a, n)
			for _, w := range s.windows {
				if in, ok := s.instanceOn(w, day); ok {
					add(in.start)
					add(in.end)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) })
}

// statusTime is t as the status stores it: whole seconds in UTC, so that a
// status computed again from the same schedule equals the one written.
func statusTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second).UTC())
}
