package weekly

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
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

// Transition dates used below:
//   - Europe/Berlin springs forward on Sunday 2026-03-29, 02:00 CET → 03:00
//     CEST (01:00 UTC), and falls back on Sunday 2026-10-25, 03:00 CEST →
//     02:00 CET (01:00 UTC): 02:00–03:00 happens twice.
//   - America/New_York springs forward on Sunday 2026-03-08, 02:00 EST →
//     03:00 EDT (07:00 UTC), and falls back on Sunday 2026-11-01, 02:00 EDT
//     → 01:00 EST (06:00 UTC): 01:00–02:00 happens twice.
//
// Each case walks a fake clock minute by minute from `from` to `until`
// the way a controller does: it arms a timer for Next, and checks at every
// minute that Contains changes exactly when the timer fires and never in
// between. `changes` are the instants the timer fired, each "open" or
// "close"; `thenNext` is Next(until) ("" for none).
var walkCases = []struct {
	name        string
	zone        string
	windows     []weeklyv1alpha1.Window
	from, until string
	inside      bool
	changes     []string
	thenNext    string
}{
	{
		name: "UTC, a window crossing midnight on weekdays, over a weekend", zone: "UTC",
		windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00")},
		// 2026-12-04 is a Friday.
		from: "2026-12-04T12:00:00Z", until: "2026-12-08T12:00:00Z",
		changes: []string{
			"2026-12-04T20:00:00Z open", "2026-12-05T08:00:00Z close", // no window opens on Saturday or Sunday
			"2026-12-07T20:00:00Z open", "2026-12-08T08:00:00Z close",
		},
		thenNext: "2026-12-08T20:00:00Z",
	},
	{
		name: "24:00 ends the day; windows that touch make one period", zone: "UTC",
		windows: []weeklyv1alpha1.Window{win("Fri", "18:00", "24:00"), win("Sat,Sun", "00:00", "24:00")},
		from:    "2026-12-04T12:00:00Z", until: "2026-12-08T00:00:00Z",
		changes:  []string{"2026-12-04T18:00:00Z open", "2026-12-07T00:00:00Z close"},
		thenNext: "2026-12-11T18:00:00Z",
	},
	{
		name: "a day range wrapping over the week's end", zone: "UTC",
		windows: []weeklyv1alpha1.Window{win("Fri-Mon", "09:00", "17:00")},
		from:    "2026-12-07T12:00:00Z", until: "2026-12-11T12:00:00Z",
		inside:   true,
		changes:  []string{"2026-12-07T17:00:00Z close", "2026-12-11T09:00:00Z open"},
		thenNext: "2026-12-11T17:00:00Z",
	},
	{
		name: "Berlin spring forward: a night window closing in the skipped hour closes at the jump", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sat", "22:00", "02:30")},
		from:    "2026-03-28T12:00:00Z", until: "2026-03-29T12:00:00Z",
		changes:  []string{"2026-03-28T21:00:00Z open", "2026-03-29T01:00:00Z close"},
		thenNext: "2026-04-04T20:00:00Z", // 22:00 CEST
	},
	{
		name: "Berlin spring forward: a window opening in the skipped hour opens at the jump", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sun", "02:30", "04:00")},
		from:    "2026-03-28T23:00:00Z", until: "2026-03-29T12:00:00Z",
		changes:  []string{"2026-03-29T01:00:00Z open", "2026-03-29T02:00:00Z close"},
		thenNext: "2026-04-05T00:30:00Z",
	},
	{
		name: "Berlin spring forward: 00:00 to 24:00 on the 23-hour day", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sun", "00:00", "24:00")},
		from:    "2026-03-28T12:00:00Z", until: "2026-03-30T00:00:00Z",
		changes: []string{"2026-03-28T23:00:00Z open", "2026-03-29T22:00:00Z close"},
	},
	{
		name: "Berlin fall back: a window opening in the repeated hour opens at its first occurrence and stays open through the second", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sun", "02:30", "03:30")},
		from:    "2026-10-24T22:00:00Z", until: "2026-10-25T12:00:00Z",
		// 02:30 CEST is 00:30 UTC; 03:30 happens once, in CET (02:30 UTC).
		changes: []string{"2026-10-25T00:30:00Z open", "2026-10-25T02:30:00Z close"},
	},
	{
		name: "Berlin fall back: a window inside the repeated hour happens once, in the first", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sun", "02:10", "02:50")},
		from:    "2026-10-24T22:00:00Z", until: "2026-10-25T12:00:00Z",
		changes: []string{"2026-10-25T00:10:00Z open", "2026-10-25T00:50:00Z close"},
	},
	{
		name: "Berlin fall back: a night window lasts 13 real hours on the 25-hour night", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sat", "20:00", "08:00")},
		from:    "2026-10-24T12:00:00Z", until: "2026-10-25T12:00:00Z",
		changes: []string{"2026-10-24T18:00:00Z open", "2026-10-25T07:00:00Z close"},
	},
	{
		name: "Berlin fall back: 00:00 to 24:00 on the 25-hour day", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Sun", "00:00", "24:00")},
		from:    "2026-10-24T12:00:00Z", until: "2026-10-26T00:00:00Z",
		changes: []string{"2026-10-24T22:00:00Z open", "2026-10-25T23:00:00Z close"},
	},
	{
		name: "New York spring forward: a window crossing midnight closes at the jump", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sat", "23:00", "02:30")},
		from:    "2026-03-07T12:00:00Z", until: "2026-03-08T12:00:00Z",
		changes:  []string{"2026-03-08T04:00:00Z open", "2026-03-08T07:00:00Z close"},
		thenNext: "2026-03-15T03:00:00Z", // 23:00 EDT
	},
	{
		name: "New York spring forward: a window opening in the skipped hour opens at the jump", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sun", "02:15", "06:00")},
		from:    "2026-03-08T00:00:00Z", until: "2026-03-08T12:00:00Z",
		changes: []string{"2026-03-08T07:00:00Z open", "2026-03-08T10:00:00Z close"},
	},
	{
		name: "New York spring forward: a window wholly in the skipped hour does not happen that day", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sun", "02:10", "02:50")},
		from:    "2026-03-08T00:00:00Z", until: "2026-03-09T00:00:00Z",
		thenNext: "2026-03-15T06:10:00Z", // 02:10 EDT a week later
	},
	{
		name: "New York fall back: a night window closing in the repeated hour closes at the first, and the repeated hour stays closed", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sat", "22:00", "01:30")},
		from:    "2026-10-31T12:00:00Z", until: "2026-11-01T12:00:00Z",
		changes: []string{"2026-11-01T02:00:00Z open", "2026-11-01T05:30:00Z close"},
	},
	{
		name: "New York fall back: a window in the repeated hour opens once", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sun", "01:30", "01:45")},
		from:    "2026-11-01T04:00:00Z", until: "2026-11-01T12:00:00Z",
		changes: []string{"2026-11-01T05:30:00Z open", "2026-11-01T05:45:00Z close"},
	},
	{
		name: "New York fall back: 01:00 to 02:00 by the clock lasts two real hours", zone: "America/New_York",
		windows: []weeklyv1alpha1.Window{win("Sun", "01:00", "02:00")},
		from:    "2026-11-01T04:00:00Z", until: "2026-11-01T12:00:00Z",
		changes: []string{"2026-11-01T05:00:00Z open", "2026-11-01T07:00:00Z close"},
	},
	{
		name: "the whole week is never left", zone: "Europe/Berlin",
		windows: []weeklyv1alpha1.Window{win("Mon-Sun", "00:00", "24:00")},
		from:    "2026-10-24T12:00:00Z", until: "2026-10-26T12:00:00Z",
		inside: true,
	},
	{
		name: "no window is never entered", zone: "UTC",
		from: "2026-10-24T12:00:00Z", until: "2026-10-25T12:00:00Z",
	},
}

func TestWalkAcrossDST(t *testing.T) {
	for _, tc := range walkCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(weeklyv1alpha1.Schedule{TimeZone: tc.zone, Windows: tc.windows})
			if err != nil {
				t.Fatal(err)
			}
			from, until := mustTime(t, tc.from), mustTime(t, tc.until)
			clk := clocktesting.NewFakeClock(from)
			in := s.Contains(from)
			if in != tc.inside {
				t.Fatalf("Contains(%s) = %v, want %v", tc.from, in, tc.inside)
			}
			timer, hasTimer := arm(s, clk)
			var got []string
			for clk.Step(time.Minute); clk.Now().Before(until); clk.Step(time.Minute) {
				now := clk.Now()
				fired := false
				if hasTimer {
					select {
					case <-timer.C():
						fired = true
					default:
					}
				}
				if !fired {
					if s.Contains(now) != in {
						t.Fatalf("Contains changed at %s without a timer for it", now.Format(time.RFC3339))
					}
					continue
				}
				if s.Contains(now) == in || s.Contains(now.Add(-time.Second)) != in {
					t.Fatalf("the timer fired at %s but Contains does not change then", now.Format(time.RFC3339))
				}
				in = !in
				got = append(got, now.UTC().Format(time.RFC3339)+map[bool]string{true: " open", false: " close"}[in])
				timer, hasTimer = arm(s, clk)
			}
			if strings.Join(got, ", ") != strings.Join(tc.changes, ", ") {
				t.Fatalf("changes\n got %v\nwant %v", got, tc.changes)
			}
			next := s.Next(until)
			switch {
			case tc.thenNext == "" && len(tc.changes) == 0 && !tc.inside && len(tc.windows) > 0:
				// A window that did not happen in the walk happens later.
				t.Fatalf("no thenNext given for a schedule that opens at %s", next)
			case tc.thenNext != "" && !next.Equal(mustTime(t, tc.thenNext)):
				t.Fatalf("Next(%s) = %s, want %s", tc.until, next.UTC().Format(time.RFC3339), tc.thenNext)
			}
		})
	}
}

// arm sets a timer on the fake clock for the schedule's next change, as a
// controller requeues for it; false when nothing changes again.
func arm(s *Schedule, clk *clocktesting.FakeClock) (interface{ C() <-chan time.Time }, bool) {
	now := clk.Now()
	next := s.Next(now)
	if next.IsZero() {
		return nil, false
	}
	return clk.NewTimer(next.Sub(now)), true
}

// NextChange sees a hand-over from one window to another that Next does
// not (the schedule stays inside), so a status naming the window is kept
// true.
func TestNextChangeAtAHandOver(t *testing.T) {
	s, err := Parse(weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-Fri", "20:00", "08:00"), win("Sat,Sun", "00:00", "24:00")}})
	if err != nil {
		t.Fatal(err)
	}
	at := mustTime(t, "2026-12-05T01:00:00Z") // Saturday, in Friday's night
	if w, ok := s.WindowAt(at); !ok || w.String() != "Mon-Fri 20:00-08:00" {
		t.Fatalf("WindowAt = %v %v", w, ok)
	}
	if got := s.NextChange(at); !got.Equal(mustTime(t, "2026-12-05T08:00:00Z")) {
		t.Fatalf("NextChange = %s", got)
	}
	if got := s.Next(at); !got.Equal(mustTime(t, "2026-12-07T00:00:00Z")) {
		t.Fatalf("Next = %s", got)
	}
}

func TestParse(t *testing.T) {
	s, err := Parse(weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{{From: "22:30:15", To: "24:00"}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Location().String() != "UTC" || s.windows[0].days != [7]bool{true, true, true, true, true, true, true} ||
		s.windows[0].from != 22*time.Hour+30*time.Minute+15*time.Second || s.windows[0].to != 24*time.Hour {
		t.Fatalf("parsed %+v in %s", s.windows[0], s.Location())
	}
	for _, tc := range []struct {
		name string
		spec weeklyv1alpha1.Schedule
		want string
	}{
		{"unknown zone", weeklyv1alpha1.Schedule{TimeZone: "Mars/Olympus_Mons"}, `timeZone "Mars/Olympus_Mons" is not a known IANA time zone`},
		{"the machine's zone", weeklyv1alpha1.Schedule{TimeZone: "Local"}, "not a known IANA time zone"},
		// A tenant writes the zone: a path is never a zone (the CRD's
		// pattern refuses it first; LoadLocation opens no file for it).
		{"a path up and out", weeklyv1alpha1.Schedule{TimeZone: "../../../../proc/self/environ"}, "not a known IANA time zone"},
		{"an absolute path", weeklyv1alpha1.Schedule{TimeZone: "/etc/localtime"}, "not a known IANA time zone"},
		{"a day spelled out", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Monday", "01:00", "02:00")}}, "windows[0]: days"},
		{"a day range left open", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon-", "01:00", "02:00")}}, "windows[0]: days"},
		{"one digit hour", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "1:00", "02:00")}}, "windows[0]: from"},
		{"a leap second", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "01:00", "01:59:60")}}, "windows[0]: to"},
		{"after 24:00", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "01:00", "24:01")}}, "after 24:00"},
		{"24:00 as a start", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "24:00", "01:00")}}, "only an end"},
		{"an empty window", weeklyv1alpha1.Schedule{Windows: []weeklyv1alpha1.Window{win("Mon", "02:00", "02:00")}}, "no window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// Instant on the readings a DST change skips or repeats.
func TestInstant(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		date string
		tod  time.Duration
		want string
	}{
		{"2026-03-29", time.Hour + 59*time.Minute, "2026-03-29T00:59:00Z"},   // CET
		{"2026-03-29", 2 * time.Hour, "2026-03-29T01:00:00Z"},                // skipped: the jump
		{"2026-03-29", 2*time.Hour + 30*time.Minute, "2026-03-29T01:00:00Z"}, // skipped: the jump
		{"2026-03-29", 3 * time.Hour, "2026-03-29T01:00:00Z"},                // CEST, the jump itself
		{"2026-10-25", 2*time.Hour + 30*time.Minute, "2026-10-25T00:30:00Z"}, // twice: the first (CEST)
		{"2026-10-25", 3 * time.Hour, "2026-10-25T02:00:00Z"},                // CET
		{"2026-10-25", 24 * time.Hour, "2026-10-25T23:00:00Z"},               // the next midnight
		{"2028-02-29", 12 * time.Hour, "2028-02-29T11:00:00Z"},
	} {
		d, err := time.Parse(time.DateOnly, tc.date)
		if err != nil {
			t.Fatal(err)
		}
		if got := Instant(d.Year(), d.Month(), d.Day(), tc.tod, berlin); !got.Equal(mustTime(t, tc.want)) {
			t.Errorf("Instant(%s + %s) = %s, want %s", tc.date, tc.tod, got.UTC().Format(time.RFC3339), tc.want)
		}
	}
}
