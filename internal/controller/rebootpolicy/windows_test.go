package rebootpolicy

import (
	"strings"
	"testing"
	"time"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/internal/weekly"
)

// Windows themselves (days, 24:00, daylight saving changes) are tested
// once, for both kinds, in internal/weekly; here what RebootPolicy makes of
// them.

func mustSchedule(t *testing.T, zone string, windows ...weeklyv1alpha1.Window) *weekly.Schedule {
	t.Helper()
	s, err := parseRestartSchedule(&weeklyv1alpha1.Schedule{TimeZone: zone, Windows: windows})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func everyDay(from, to string) weeklyv1alpha1.Window {
	return weeklyv1alpha1.Window{From: from, To: to}
}

func TestParseRestartSchedule(t *testing.T) {
	if s, err := parseRestartSchedule(nil); s != nil || err != nil {
		t.Fatalf("no restartSchedule: %v, %v; want any time", s, err)
	}
	for _, tc := range []struct {
		spec weeklyv1alpha1.Schedule
		want string
	}{
		{weeklyv1alpha1.Schedule{TimeZone: "Mars/Olympus_Mons", Windows: []weeklyv1alpha1.Window{everyDay("01:00", "02:00")}}, `restartSchedule.timeZone "Mars/Olympus_Mons"`},
		{weeklyv1alpha1.Schedule{TimeZone: "Local", Windows: []weeklyv1alpha1.Window{everyDay("01:00", "02:00")}}, `restartSchedule.timeZone "Local"`},
		{weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{everyDay("01:00", "02:00"), everyDay("01:00", "01:00")}}, "restartSchedule.windows[1]: from 01:00 to 01:00 is no window"},
	} {
		if _, err := parseRestartSchedule(&tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.spec, err, tc.want)
		}
	}
}

func TestWindowWait(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if d, _, ok := windowWait(nil, now); d != 0 || !ok {
		t.Fatal("no restart schedule: must not wait")
	}
	twoWindows := mustSchedule(t, "", everyDay("14:00", "15:00"), everyDay("13:00", "13:30"))
	d, at, ok := windowWait(twoWindows, now)
	if !ok || d != time.Hour || !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("wait %s until %s, want 1h (the earlier window)", d, at)
	}
	open := mustSchedule(t, "", everyDay("14:00", "15:00"), everyDay("11:00", "13:00"))
	if d, _, _ := windowWait(open, now); d != 0 {
		t.Fatalf("inside a window: wait %s", d)
	}
	// 24:00 closes at midnight: at 23:59:59 the window is open, at
	// midnight the next opens 23 hours later.
	evening := mustSchedule(t, "Europe/Berlin", everyDay("23:00", "24:00"))
	berlin := evening.Location()
	if d, _, _ := windowWait(evening, time.Date(2026, 6, 1, 23, 59, 59, 0, berlin)); d != 0 {
		t.Fatalf("23:59:59 in 23:00-24:00: wait %s", d)
	}
	if d, _, _ := windowWait(evening, time.Date(2026, 6, 2, 0, 0, 0, 0, berlin)); d != 23*time.Hour {
		t.Fatalf("midnight after 23:00-24:00: wait %s, want 23h", d)
	}
}
