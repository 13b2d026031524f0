package rebootpolicy

import (
	"testing"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustWindow(t *testing.T, days []autorebootv1alpha1.Weekday, from, to, tz string) restartWindow {
	t.Helper()
	w, err := parseWindow(autorebootv1alpha1.RestartWindow{Days: days, From: from, To: to, TimeZone: tz})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestParseWindowRefusesWhatTheCRDCannotCheck(t *testing.T) {
	for _, w := range []autorebootv1alpha1.RestartWindow{
		{From: "01:00", To: "02:00", TimeZone: "Mars/Olympus_Mons"},
		{From: "01:00", To: "02:00", TimeZone: "Local"},
		{From: "1:00", To: "02:00"},
		{From: "01:00", To: "01:00"},
		{From: "24:00", To: "01:00"},
		{From: "01:00:60", To: "02:00"},
	} {
		if _, err := parseWindows([]autorebootv1alpha1.RestartWindow{w}); err == nil {
			t.Errorf("%+v accepted", w)
		}
	}
	if w := mustWindow(t, nil, "22:30:15", "04:00", ""); w.from != 22*3600+30*60+15 || w.to != 4*3600 || w.loc.String() != "UTC" {
		t.Fatalf("parsed %+v", w)
	}
}

func TestWindowContains(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	weekdaysOnly := []autorebootv1alpha1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}
	office := mustWindow(t, weekdaysOnly, "09:00", "17:00", "Europe/Berlin")
	night := mustWindow(t, []autorebootv1alpha1.Weekday{"Fri"}, "22:00", "02:00", "Europe/Berlin")
	cases := []struct {
		name string
		w    restartWindow
		at   time.Time
		want bool
	}{
		{"office: Monday 09:00 sharp", office, time.Date(2026, 3, 2, 9, 0, 0, 0, berlin), true},
		{"office: Monday 16:59:59", office, time.Date(2026, 3, 2, 16, 59, 59, 0, berlin), true},
		{"office: Monday 17:00 (exclusive)", office, time.Date(2026, 3, 2, 17, 0, 0, 0, berlin), false},
		{"office: Saturday noon", office, time.Date(2026, 3, 7, 12, 0, 0, 0, berlin), false},
		{"office: in local time, not UTC (08:30 UTC is 09:30 in Berlin)", office, time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC), true},
		{"night: Friday 23:00", night, time.Date(2026, 3, 6, 23, 0, 0, 0, berlin), true},
		{"night: Saturday 01:59 belongs to Friday's window", night, time.Date(2026, 3, 7, 1, 59, 0, 0, berlin), true},
		{"night: Saturday 02:00", night, time.Date(2026, 3, 7, 2, 0, 0, 0, berlin), false},
		{"night: Friday 01:00 belongs to Thursday, not listed", night, time.Date(2026, 3, 6, 1, 0, 0, 0, berlin), false},
		{"night: Saturday 23:00", night, time.Date(2026, 3, 7, 23, 0, 0, 0, berlin), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.contains(tc.at); got != tc.want {
				t.Fatalf("contains(%s) = %v", tc.at, got)
			}
		})
	}
}

func TestNextOpeningAcrossDST(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	berlin := mustLoc(t, "Europe/Berlin")
	cases := []struct {
		name string
		w    restartWindow
		now  time.Time
		want time.Time
	}{
		{"later today", mustWindow(t, nil, "03:00", "04:00", "Europe/Berlin"),
			time.Date(2026, 6, 1, 1, 0, 0, 0, berlin), time.Date(2026, 6, 1, 3, 0, 0, 0, berlin)},
		{"tomorrow after today's window", mustWindow(t, nil, "03:00", "04:00", "Europe/Berlin"),
			time.Date(2026, 6, 1, 5, 0, 0, 0, berlin), time.Date(2026, 6, 2, 3, 0, 0, 0, berlin)},
		{"next listed day (Friday → Monday)", mustWindow(t, []autorebootv1alpha1.Weekday{"Mon"}, "09:00", "10:00", "Europe/Berlin"),
			time.Date(2026, 3, 6, 12, 0, 0, 0, berlin), time.Date(2026, 3, 9, 9, 0, 0, 0, berlin)},
		// Berlin springs forward on 2026-03-29 at 02:00 → 03:00: 01:30
		// local is 00:30 UTC the day before, 23:30 UTC after.
		{"Berlin 01:30 the day after spring-forward is 23:30 UTC", mustWindow(t, nil, "01:30", "02:00", "Europe/Berlin"),
			time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 23, 30, 0, 0, time.UTC)},
		{"Berlin 01:30 the day before spring-forward is 00:30 UTC", mustWindow(t, nil, "01:30", "02:00", "Europe/Berlin"),
			time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)},
		// New York springs forward on 2026-03-08: 02:00–03:00 does not
		// exist, so a 02:30–03:30 window opens when the clock jumps to 03:00.
		{"NY window starting in the skipped hour opens at the jump", mustWindow(t, nil, "02:30", "03:30", "America/New_York"),
			time.Date(2026, 3, 8, 1, 0, 0, 0, ny), time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)},
		{"NY window inside the skipped hour does not exist that day", mustWindow(t, nil, "02:10", "02:50", "America/New_York"),
			time.Date(2026, 3, 8, 1, 0, 0, 0, ny), time.Date(2026, 3, 9, 2, 10, 0, 0, ny)},
		// New York falls back on 2026-11-01: 01:00–02:00 EDT, then again
		// 01:00–02:00 EST. A window in that hour opens twice.
		{"NY fall-back: the repeated hour opens again", mustWindow(t, nil, "01:30", "01:45", "America/New_York"),
			time.Date(2026, 11, 1, 5, 50, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)},
		{"a wrapping window opens on its listed day", mustWindow(t, []autorebootv1alpha1.Weekday{"Sat"}, "23:00", "01:00", "UTC"),
			time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.w.contains(tc.now) {
				t.Fatalf("now %s is inside the window", tc.now)
			}
			got, ok := tc.w.nextOpening(tc.now)
			if !ok || !got.Equal(tc.want) {
				t.Fatalf("next opening = %s (%v), want %s", got.UTC(), ok, tc.want.UTC())
			}
			if !tc.w.contains(got) || tc.w.contains(got.Add(-time.Second)) {
				t.Fatalf("%s is no opening", got.UTC())
			}
		})
	}
}

func TestWindowWait(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if d, _, ok := windowWait(nil, now); d != 0 || !ok {
		t.Fatal("no windows: must not wait")
	}
	a := mustWindow(t, nil, "14:00", "15:00", "UTC")
	b := mustWindow(t, nil, "13:00", "13:30", "UTC")
	d, at, ok := windowWait([]restartWindow{a, b}, now)
	if !ok || d != time.Hour || !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("wait %s until %s, want 1h (the earlier window)", d, at)
	}
	open := mustWindow(t, nil, "11:00", "13:00", "UTC")
	if d, _, _ := windowWait([]restartWindow{a, open}, now); d != 0 {
		t.Fatalf("inside a window: wait %s", d)
	}
}
