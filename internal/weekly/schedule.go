package weekly

import (
	"slices"
	"time"
)

// Schedule is a parsed weekly schedule: windows read in one zone.
type Schedule struct {
	loc     *time.Location
	windows []Window
}

// Window is one parsed window: it opens on its days at from and closes at
// to, on the next day when to is not after from.
type Window struct {
	days     [7]bool // by time.Weekday
	from, to time.Duration
	text     string
}

// String is the window as the user wrote it, e.g. "Mon-Fri 20:00-08:00".
func (w Window) String() string { return w.text }

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// occurrence is one occurrence of a window: [open, close) in real time.
type occurrence struct{ open, close time.Time }

// occurrenceOn is the occurrence of w that opens on the wall date day; ok
// is false when w does not open on that weekday. It may be empty (open ==
// close) when the whole window lies in an hour the clock skips.
func (s *Schedule) occurrenceOn(w Window, day wallTime) (occurrence, bool) {
	if !w.days[day.Weekday()] {
		return occurrence{}, false
	}
	end := day.Add(w.to)
	if w.to <= w.from {
		end = end.AddDate(0, 0, 1)
	}
	return occurrence{open: instantOf(day.Add(w.from), s.loc), close: instantOf(end, s.loc)}, true
}

// localDay is the wall date of t in the schedule's zone, offset by n days.
func (s *Schedule) localDay(t time.Time, n int) wallTime {
	w := wallOf(t, s.loc)
	return wallDate(w.Year(), w.Month(), w.Day()+n)
}

// WindowAt is the first listed window that has an occurrence containing t.
// A window lasts at most a wall-clock day, so only occurrences that opened
// on t's date or the two dates before can contain it.
func (s *Schedule) WindowAt(t time.Time) (Window, bool) {
	for _, w := range s.windows {
		for n := -2; n <= 0; n++ {
			if o, ok := s.occurrenceOn(w, s.localDay(t, n)); ok && !t.Before(o.open) && t.Before(o.close) {
				return w, true
			}
		}
	}
	return Window{}, false
}

// Contains says whether t is inside one of the windows.
func (s *Schedule) Contains(t time.Time) bool {
	_, ok := s.WindowAt(t)
	return ok
}

// horizonDays is how many days of window occurrences the Next functions
// look at after an instant: a schedule repeats every week, and the extra
// day covers a daylight saving change in between.
const horizonDays = 8

// Boundaries are the instants at which a window opens or closes, for the
// occurrences that open on the wall dates from two days before around's
// to horizonDays after it, in order, without duplicates. A caller that
// overlays its own periods (NSScaler's exceptions) takes them around the
// ends of those periods too.
func (s *Schedule) Boundaries(around time.Time) []time.Time {
	var out []time.Time
	for n := -2; n <= horizonDays; n++ {
		day := s.localDay(around, n)
		for _, w := range s.windows {
			if o, ok := s.occurrenceOn(w, day); ok && o.open.Before(o.close) {
				out = append(out, o.open, o.close)
			}
		}
	}
	return SortedUnique(out)
}

// Next is the first instant after t at which Contains differs from
// Contains(t): when the next window opens if t is outside, when the one
// containing t (and every window touching or overlapping it) closes if t
// is inside. Zero when it never changes (no window, or windows covering
// the whole week).
func (s *Schedule) Next(t time.Time) time.Time {
	in := s.Contains(t)
	return s.firstBoundaryAfter(t, func(u time.Time) bool { return s.Contains(u) != in })
}

// NextChange is the first instant after t at which WindowAt changes at
// all: Contains does, or one window hands over to another that touches or
// overlaps it (a status that names the window changes then). Zero when
// nothing changes again.
func (s *Schedule) NextChange(t time.Time) time.Time {
	cur, in := s.WindowAt(t)
	return s.firstBoundaryAfter(t, func(u time.Time) bool {
		w, ok := s.WindowAt(u)
		return ok != in || w.text != cur.text
	})
}

func (s *Schedule) firstBoundaryAfter(t time.Time, differs func(time.Time) bool) time.Time {
	for _, b := range s.Boundaries(t) {
		if b.After(t) && differs(b) {
			return b
		}
	}
	return time.Time{}
}

// SortedUnique sorts instants and drops repeated ones.
func SortedUnique(ts []time.Time) []time.Time {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(ts, func(a, b time.Time) bool { return a.Equal(b) })
}
