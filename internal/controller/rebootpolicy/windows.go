package rebootpolicy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// restartWindow is a spec.restartWindows entry, parsed. Its times are
// wall-clock times of loc: in the window means the local weekday and time
// of day say so, which keeps the window at its local hours across
// daylight saving changes.
type restartWindow struct {
	days     [7]bool // by time.Weekday
	from, to int     // seconds since local midnight; to < from wraps
	loc      *time.Location
}

// windowHorizon is how far ahead the next opening is looked for (a week
// and a day covers every weekly window across one DST change).
const windowHorizon = 8 * 24 * time.Hour

var weekdays = map[autorebootv1alpha1.Weekday]time.Weekday{
	autorebootv1alpha1.Sunday: time.Sunday, autorebootv1alpha1.Monday: time.Monday, autorebootv1alpha1.Tuesday: time.Tuesday,
	autorebootv1alpha1.Wednesday: time.Wednesday, autorebootv1alpha1.Thursday: time.Thursday,
	autorebootv1alpha1.Friday: time.Friday, autorebootv1alpha1.Saturday: time.Saturday,
}

// parseWindows turns spec windows into restartWindows; an unknown time
// zone (the CRD cannot check IANA names) is an error for a condition.
func parseWindows(spec []autorebootv1alpha1.RestartWindow) ([]restartWindow, error) {
	out := make([]restartWindow, 0, len(spec))
	for i, s := range spec {
		w, err := parseWindow(s)
		if err != nil {
			return nil, fmt.Errorf("restartWindows[%d]: %w", i, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseWindow(s autorebootv1alpha1.RestartWindow) (restartWindow, error) {
	var w restartWindow
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "Local") {
		return w, fmt.Errorf("time zone %q is not an IANA time zone name", tz)
	}
	w.loc = loc
	if w.from, err = timeOfDay(s.From); err != nil {
		return w, fmt.Errorf("from: %w", err)
	}
	if w.to, err = timeOfDay(s.To); err != nil {
		return w, fmt.Errorf("to: %w", err)
	}
	if w.from == w.to {
		return w, fmt.Errorf("from and to are both %s", s.From)
	}
	if len(s.Days) == 0 {
		w.days = [7]bool{true, true, true, true, true, true, true}
	}
	for _, d := range s.Days {
		wd, ok := weekdays[d]
		if !ok {
			return w, fmt.Errorf("unknown day %q", d)
		}
		w.days[wd] = true
	}
	return w, nil
}

// timeOfDay parses "HH:MM" or "HH:MM:SS" into seconds since midnight.
func timeOfDay(s string) (int, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("%q is not HH:MM or HH:MM:SS", s)
	}
	limits := []int{23, 59, 59}
	total := 0
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || n < 0 || n > limits[i] {
			return 0, fmt.Errorf("%q is not HH:MM or HH:MM:SS", s)
		}
		total = total*60 + n
	}
	if len(parts) == 2 {
		total *= 60
	}
	return total, nil
}

// contains reports whether t lies in the window.
func (w restartWindow) contains(t time.Time) bool {
	lt := t.In(w.loc)
	tod := lt.Hour()*3600 + lt.Minute()*60 + lt.Second()
	day := lt.Weekday()
	if w.from < w.to {
		return w.days[day] && tod >= w.from && tod < w.to
	}
	// Wraps past midnight: the evening part on a listed day, the morning
	// part on the day after one.
	return (w.days[day] && tod >= w.from) || (w.days[(day+6)%7] && tod < w.to)
}

// nextOpening is the first instant after now at which the window is open,
// false when there is none within the horizon. The timeline is walked in
// spans of one UTC offset (between two zone transitions): within a span
// the window opens at a listed day's from, and a span may begin inside the
// window (the clock jumped into it).
func (w restartWindow) nextOpening(now time.Time) (time.Time, bool) {
	horizon := now.Add(windowHorizon)
	for t := now; t.Before(horizon); {
		lt := t.In(w.loc)
		_, end := lt.ZoneBounds()
		if end.IsZero() || end.After(horizon) {
			end = horizon
		}
		if t.After(now) && w.contains(t) {
			return t, true
		}
		_, offset := lt.Zone()
		zone := time.FixedZone("", offset)
		for d := lt.AddDate(0, 0, -1); ; d = d.AddDate(0, 0, 1) {
			open := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, w.from, 0, zone)
			if !open.Before(end) {
				break
			}
			if open.After(now) && !open.Before(t) && w.days[open.Weekday()] {
				return open, true
			}
		}
		t = end
	}
	return time.Time{}, false
}

// windowWait says whether a restart may be made at now: zero when no
// window is set or one is open, else how long until the next opening
// (and when it is; false if none is ever open).
func windowWait(ws []restartWindow, now time.Time) (time.Duration, time.Time, bool) {
	if len(ws) == 0 {
		return 0, now, true
	}
	var next time.Time
	for _, w := range ws {
		if w.contains(now) {
			return 0, now, true
		}
		if at, ok := w.nextOpening(now); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		return 0, time.Time{}, false
	}
	return next.Sub(now), next, true
}
