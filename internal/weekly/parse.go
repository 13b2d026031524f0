package weekly

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
	// The manager's image may carry no zoneinfo: schedules read their time
	// zones from the binary's own copy of the IANA database.
	_ "time/tzdata"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// Parse checks and parses a schedule. The CRD validates the grammar; what
// it cannot check (whether the zone exists in the manager's database) and
// what a Go caller could get wrong is an error naming the field, relative
// to the schedule (timeZone, windows[i].days, …).
func Parse(spec weeklyv1alpha1.Schedule) (*Schedule, error) {
	loc, err := LoadZone(spec.TimeZone)
	if err != nil {
		return nil, err
	}
	s := &Schedule{loc: loc}
	for i, w := range spec.Windows {
		pw, err := parseWindow(w)
		if err != nil {
			return nil, fmt.Errorf("windows[%d]: %w", i, err)
		}
		s.windows = append(s.windows, pw)
	}
	return s, nil
}

// LoadZone is the location of a schedule's timeZone (UTC when empty). The
// machine's own zone ("Local") is refused: a schedule must mean the same
// on every replica.
func LoadZone(name string) (*time.Location, error) {
	zone := cmp.Or(name, weeklyv1alpha1.DefaultTimeZone)
	loc, err := time.LoadLocation(zone)
	if err != nil || strings.EqualFold(zone, "Local") {
		return nil, fmt.Errorf("timeZone %q is not a known IANA time zone", zone)
	}
	return loc, nil
}

var weekdays = map[string]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// everyDay is the days of a window that names none.
const everyDay = "Mon-Sun"

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

// parseTimeOfDay reads HH:MM or HH:MM:SS; 24:00 is the end of the day.
func parseTimeOfDay(s string) (time.Duration, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("%q: use HH:MM or HH:MM:SS", s)
	}
	var fields [3]int
	limits := [3]int{24, 59, 59}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || n < 0 || n > limits[i] {
			return 0, fmt.Errorf("%q: use HH:MM or HH:MM:SS", s)
		}
		fields[i] = n
	}
	d := time.Duration(fields[0])*time.Hour + time.Duration(fields[1])*time.Minute + time.Duration(fields[2])*time.Second
	if d > 24*time.Hour {
		return 0, fmt.Errorf("%q is after 24:00", s)
	}
	return d, nil
}

func parseWindow(w weeklyv1alpha1.Window) (Window, error) {
	daysText := cmp.Or(w.Days, everyDay)
	days, err := parseDays(daysText)
	if err != nil {
		return Window{}, err
	}
	from, err := parseTimeOfDay(w.From)
	if err != nil {
		return Window{}, fmt.Errorf("from: %w", err)
	}
	to, err := parseTimeOfDay(w.To)
	if err != nil {
		return Window{}, fmt.Errorf("to: %w", err)
	}
	if from == 24*time.Hour {
		return Window{}, fmt.Errorf("from 24:00: 24:00 is only an end")
	}
	if from == to {
		return Window{}, fmt.Errorf("from %s to %s is no window; use 00:00 to 24:00 for a whole day", w.From, w.To)
	}
	return Window{days: days, from: from, to: to, text: fmt.Sprintf("%s %s-%s", daysText, w.From, w.To)}, nil
}
