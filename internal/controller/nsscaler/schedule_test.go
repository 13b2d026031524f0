package nsscaler

import (
	"strings"
	"testing"
	"time"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

const (
	asleep = scalingv1alpha1.PhaseAsleep
	awake  = scalingv1alpha1.PhaseAwake
)

func win(days, from, to string) weeklyv1alpha1.Window {
	return weeklyv1alpha1.Window{Days: days, From: from, To: to}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// scheduleCase: at instant `at` the schedule says `phase`, and the phase
// next changes at `next` ("" for never).
type scheduleCase struct {
	name     string
	at       string
	phase    scalingv1alpha1.Phase
	next     string
	reasonIs string // a substring of the verdict's reason
}

func runScheduleCases(t *testing.T, spec scalingv1alpha1.Schedule, cases []scheduleCase) {
	t.Helper()
	s, err := ParseSchedule(&spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := mustTime(t, tc.at)
			v := s.At(at)
			if v.Phase != tc.phase {
				t.Fatalf("At(%s) = %s (%s), want %s", tc.at, v.Phase, v.Reason, tc.phase)
			}
			if tc.reasonIs != "" && !strings.Contains(v.Reason, tc.reasonIs) {
				t.Fatalf("reason %q does not say %q", v.Reason, tc.reasonIs)
			}
			next := s.Next(at)
			switch {
			case tc.next == "" && !next.IsZero():
				t.Fatalf("Next(%s) = %s, want none", tc.at, next.Format(time.RFC3339))
			case tc.next != "" && !next.Equal(mustTime(t, tc.next)):
				t.Fatalf("Next(%s) = %s, want %s", tc.at, next.Format(time.RFC3339), tc.next)
			}
		})
	}
}

// 2026-11-30 is a Monday.
func TestScheduleWindowAcrossMidnight(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")}}}, []scheduleCase{
		{"monday evening, before", "2026-11-30T19:59:59Z", awake, "2026-11-30T20:00:00Z", "outside the sleep windows (UTC)"},
		{"monday at the start", "2026-11-30T20:00:00Z", asleep, "2026-12-01T08:00:00Z", "sleep window Mon-Fri 20:00-08:00 (UTC)"},
		{"past midnight", "2026-12-01T03:00:00Z", asleep, "2026-12-01T08:00:00Z", ""},
		{"tuesday at the end", "2026-12-01T08:00:00Z", awake, "2026-12-01T20:00:00Z", ""},
		{"friday night ends saturday morning", "2026-12-04T23:00:00Z", asleep, "2026-12-05T08:00:00Z", ""},
		{"saturday: no window starts", "2026-12-05T21:00:00Z", awake, "2026-12-07T20:00:00Z", ""},
		{"sunday night: no window started", "2026-12-06T23:00:00Z", awake, "2026-12-07T20:00:00Z", ""},
	})
}

func TestScheduleMultipleWindows(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{
		win("Mon-Fri", "20:00", "08:00"),
		win("Sat,Sun", "00:00", "24:00"),
		win("Wed", "12:00", "13:30"),
	}}}, []scheduleCase{
		// Fri 20:00 → Sat 08:00, Sat and Sun whole days: one sleep until
		// Monday 00:00 (no window starts on Sunday evening).
		{"friday night runs into the weekend", "2026-12-04T21:00:00Z", asleep, "2026-12-07T00:00:00Z", ""},
		{"the window boundary inside is no transition", "2026-12-05T07:59:00Z", asleep, "2026-12-07T00:00:00Z", ""},
		{"monday early morning", "2026-12-07T01:00:00Z", awake, "2026-12-07T20:00:00Z", ""},
		{"wednesday lunch", "2026-12-02T12:30:00Z", asleep, "2026-12-02T13:30:00Z", "Wed 12:00-13:30"},
		{"wednesday morning", "2026-12-02T09:00:00Z", awake, "2026-12-02T12:00:00Z", ""},
	})
}

func TestScheduleWrappingDayRange(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Fri-Mon", "09:00", "17:00")}}}, []scheduleCase{
		{"sunday", "2026-12-06T10:00:00Z", asleep, "2026-12-06T17:00:00Z", ""},
		{"monday", "2026-12-07T10:00:00Z", asleep, "2026-12-07T17:00:00Z", ""},
		{"tuesday: next is friday", "2026-12-08T10:00:00Z", awake, "2026-12-11T09:00:00Z", ""},
	})
}

func TestScheduleExceptionsOverWindows(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{
		Schedule: weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin", Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")}},
		Exceptions: []scalingv1alpha1.ScheduleException{
			// Dates: whole days in the schedule's zone, until included.
			{Name: "christmas", From: "2026-12-24", Until: "2026-12-26", Phase: asleep},
			// Overlaps christmas: the first listed wins.
			{Name: "late-release", From: "2026-12-25T10:00:00+01:00", Until: "2026-12-25T12:00:00+01:00", Phase: awake},
			{Name: "release-night", From: "2026-12-01T19:00:00Z", Until: "2026-12-02T02:00:00Z", Phase: awake},
		},
	}, []scheduleCase{
		{"christmas eve at noon", "2026-12-24T11:00:00Z", asleep, "2026-12-26T23:00:00Z", "exception christmas (Asleep) until 2026-12-27T00:00:00+01:00"},
		{"the overlapping exception listed later loses", "2026-12-25T09:30:00Z", asleep, "2026-12-26T23:00:00Z", "christmas"},
		{"before christmas, in the window", "2026-12-23T20:00:00Z", asleep, "2026-12-26T23:00:00Z", "sleep window"},
		// After christmas (ends Sunday 27 00:00 Berlin) the windows resume
		// on Monday 28 at 20:00.
		{"christmas ends into the weekend", "2026-12-26T22:59:59Z", asleep, "2026-12-26T23:00:00Z", ""},
		{"sunday after christmas", "2026-12-27T10:00:00Z", awake, "2026-12-28T19:00:00Z", ""},
		{"an awake exception inside a window", "2026-12-01T20:30:00Z", awake, "2026-12-02T02:00:00Z", "release-night"},
		// It starts with the window (20:00 Berlin) and outlasts it: awake
		// until 03:00, then asleep for the rest of the night.
		{"it starts with the window", "2026-12-01T18:59:00Z", awake, "2026-12-02T02:00:00Z", ""},
		{"the night resumes after it", "2026-12-02T02:00:00Z", asleep, "2026-12-02T07:00:00Z", "sleep window"},
	})
}

// A long exception hides the windows under it: the next transition after
// it comes from the windows, weeks away from now.
func TestScheduleNextTransitionAfterALongException(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{
		Schedule:   weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Sat", "10:00", "12:00")}},
		Exceptions: []scalingv1alpha1.ScheduleException{{From: "2026-12-01", Until: "2026-12-31", Phase: awake}},
	}, []scheduleCase{
		// 2027-01-02 is the first Saturday after it.
		{"inside", "2026-12-02T21:00:00Z", awake, "2027-01-02T10:00:00Z", "exception #0 (Awake)"},
	})
}

func TestScheduleWithoutAnyChangeAhead(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-Sun", "00:00", "24:00")}}}, []scheduleCase{
		{"always asleep", "2026-12-02T21:00:00Z", asleep, "", ""},
	})
	runScheduleCases(t, scalingv1alpha1.Schedule{Exceptions: []scalingv1alpha1.ScheduleException{{From: "2026-12-01", Until: "2026-12-01", Phase: asleep}}}, []scheduleCase{
		{"before the only exception", "2026-11-30T12:00:00Z", awake, "2026-12-01T00:00:00Z", ""},
		{"during it", "2026-12-01T12:00:00Z", asleep, "2026-12-02T00:00:00Z", ""},
		{"after it: awake for good", "2026-12-03T12:00:00Z", awake, "", ""},
	})
}

// Daylight saving changes are tested once, for both kinds, in
// internal/weekly (TestWalkAcrossDST); here only what NSScaler adds on top
// of the windows: exceptions, reasons, and a date's midnight in the zone.

func TestScheduleLeapDay(t *testing.T) {
	runScheduleCases(t, scalingv1alpha1.Schedule{
		Exceptions: []scalingv1alpha1.ScheduleException{{Name: "leap", From: "2028-02-29", Until: "2028-02-29", Phase: asleep}},
		// 2028-02-29 is a Tuesday.
		Schedule: weeklyv1alpha1.Schedule{TimeZone: "America/New_York", Windows: []weeklyv1alpha1.Window{win("Tue", "22:00", "06:00")}},
	}, []scheduleCase{
		{"the leap day, all day", "2028-02-29T12:00:00Z", asleep, "2028-03-01T11:00:00Z", "exception leap"},
		{"its night window carries on after it", "2028-03-01T05:30:00Z", asleep, "2028-03-01T11:00:00Z", "sleep window"},
		{"the day before", "2028-02-28T12:00:00Z", awake, "2028-02-29T05:00:00Z", ""},
	})
}

func TestParseScheduleRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec scalingv1alpha1.Schedule
		want string
	}{
		{"unknown zone", scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Mars/Olympus_Mons", Windows: []weeklyv1alpha1.Window{win("Mon", "01:00", "02:00")}}}, `schedule.timeZone "Mars/Olympus_Mons" is not a known IANA time zone`},
		{"the machine's zone", scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{TimeZone: "Local", Windows: []weeklyv1alpha1.Window{win("Mon", "01:00", "02:00")}}}, "not a known IANA time zone"},
		{"bad day", scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Monday", "01:00", "02:00")}}}, "schedule.windows[0]: days"},
		{"bad time", scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "1:00", "02:00")}}}, "schedule.windows[0]: from"},
		{"empty window", scalingv1alpha1.Schedule{Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "02:00", "02:00")}}}, "no window"},
		{"no such date", scalingv1alpha1.Schedule{Exceptions: []scalingv1alpha1.ScheduleException{{From: "2027-02-29", Until: "2027-03-01", Phase: asleep}}}, "exceptions[0]: from"},
		{"end before start (mixed forms)", scalingv1alpha1.Schedule{Exceptions: []scalingv1alpha1.ScheduleException{{From: "2027-03-02", Until: "2027-03-01T10:00:00Z", Phase: asleep}}}, "is not after from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchedule(&tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSchedule: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// NextChange: the verdict's reason changes where the phase does not — an
// exception ends inside a window, a window hands over to one that touches
// it — and the status is updated then.
func TestScheduleNextChange(t *testing.T) {
	s, err := ParseSchedule(&scalingv1alpha1.Schedule{
		Schedule: weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00"), win("Sat,Sun", "00:00", "24:00")}},
		Exceptions: []scalingv1alpha1.ScheduleException{
			{Name: "christmas", From: "2026-12-24", Until: "2026-12-25", Phase: asleep},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ at, change, next string }{
		// Christmas ends on Saturday 00:00, inside Friday's night.
		{"2026-12-24T12:00:00Z", "2026-12-26T00:00:00Z", "2026-12-28T00:00:00Z"},
		// Friday's night hands over to the weekend at Saturday 08:00.
		{"2026-12-05T01:00:00Z", "2026-12-05T08:00:00Z", "2026-12-07T00:00:00Z"},
		// No reason changes before the phase does.
		{"2026-12-07T01:00:00Z", "2026-12-07T20:00:00Z", "2026-12-07T20:00:00Z"},
	} {
		at := mustTime(t, tc.at)
		if got := s.NextChange(at); !got.Equal(mustTime(t, tc.change)) {
			t.Errorf("NextChange(%s) = %s, want %s", tc.at, got.Format(time.RFC3339), tc.change)
		}
		if got := s.Next(at); !got.Equal(mustTime(t, tc.next)) {
			t.Errorf("Next(%s) = %s, want %s", tc.at, got.Format(time.RFC3339), tc.next)
		}
	}
}
