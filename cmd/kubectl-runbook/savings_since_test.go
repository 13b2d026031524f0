package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func day(name, pods, cpu, mem string) scalingv1alpha1.DailySavings {
	return scalingv1alpha1.DailySavings{Day: name, SavingsTotals: scalingv1alpha1.SavingsTotals{PodHours: q(pods), CPUCoreHours: q(cpu), MemoryGiBHours: q(mem)}}
}

// historyScaler: nightly at savingsNow (2026-12-02T22:00Z) with daily
// history. proj-a parked 3 pods of 250m/128Mi since 20:00, on top of 6
// pod-hours on 12-01 and 4 on 12-02; proj-b 2 pod-hours on 12-01. The
// NSScaler's own days also hold 3 pod-hours on 11-30 from a namespace no
// longer listed; the namespaces' history was bounded to start on 12-01.
func historyScaler() *scalingv1alpha1.NSScaler {
	s := savingsScalers()[0]
	rep := s.Status.Savings
	rep.DailyFrom = ptr.To(metav1.NewTime(time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)))
	rep.NamespaceDailyFrom = ptr.To(metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	rep.Daily = []scalingv1alpha1.DailySavings{day("2026-11-30", "3", "0.75", "0.375"), day("2026-12-01", "8", "2", "1"), day("2026-12-02", "4", "1", "0.5")}
	rep.Namespaces[0].Daily = []scalingv1alpha1.DailySavings{day("2026-12-01", "6", "1.5", "0.75"), day("2026-12-02", "4", "1", "0.5")}
	rep.Namespaces[1].Daily = []scalingv1alpha1.DailySavings{day("2026-12-01", "2", "0.5", "0.25")}
	return s
}

func TestSavingsSinceSumsTheDays(t *testing.T) {
	cl := fakeClient(nil, historyScaler())
	since := mustParseSince(t, "24h")
	// From 2026-12-01T00:00Z (the UTC day holding 22:00 yesterday):
	// proj-a 6 + 4 + 3 pods × 2h open = 16 pod-hours, 1.5 + 1 + 1.5 = 4
	// core-hours, 0.75 + 0.5 + 0.75 = 2 GiB-hours; the total has the
	// NSScaler's 8 + 4 + 6 (11-30 is before the window).
	want := `NSSCALER  NAMESPACE  PARKED PODS  POD-HOURS  CPU CORE-HOURS  MEMORY GIB-HOURS  COST      SINCE
nightly   proj-a     3            16.000     4.000           2.000             0.17 EUR  2026-12-01T00:00:00Z
nightly   proj-b     0            2.000      0.500           0.250             0.02 EUR  2026-12-01T00:00:00Z
nightly   TOTAL      3            18.000     4.500           2.250             0.19 EUR  2026-12-01T00:00:00Z
`
	wantSavingsTable(t, mustSavingsRows(t, cl, &since), want)

	// Since today: the day's 4 closed pod-hours and the 2 open hours.
	today := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	rows, err := savingsRows(context.Background(), cl, []string{"nightly"}, savingsNow, &today)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].PodHours != "10.000" || rows[1].PodHours != "0.000" || rows[2].PodHours != "10.000" || rows[2].CPUCoreHours != "2.500" {
		t.Fatalf("since today: %+v", rows)
	}
}

func TestSavingsSinceBeyondTheHistory(t *testing.T) {
	since := mustParseSince(t, "2026-11-01")
	rows := mustSavingsRows(t, fakeClient(nil, historyScaler()), &since)
	// The namespaces' history starts on 12-01, the NSScaler's at 11-30
	// 20:00: 3 + 8 + 4 + 6 = 21 pod-hours in total.
	want := `NSSCALER  NAMESPACE  PARKED PODS  POD-HOURS  CPU CORE-HOURS  MEMORY GIB-HOURS  COST      SINCE
nightly   proj-a     3            16.000     4.000           2.000             0.17 EUR  2026-12-01T00:00:00Z *
nightly   proj-b     0            2.000      0.500           0.250             0.02 EUR  2026-12-01T00:00:00Z *
nightly   TOTAL      3            21.000     5.250           2.625             0.22 EUR  2026-11-30T20:00:00Z *
* --since reaches before the history kept: these figures start at SINCE.
`
	wantSavingsTable(t, rows, want)
	if got := savingsJSON(t, rows); len(got) != 3 || !got[2].BeyondHistory || got[2].Since != "2026-11-30T20:00:00Z" {
		t.Fatalf("json rows %+v", got)
	}

	// A report written before the history existed has none: its figures
	// start now and say so, the open interval's past not counted twice.
	for _, r := range mustSavingsRows(t, fakeClient(nil, savingsScalers()[0]), &since) {
		if !r.BeyondHistory || r.PodHours != "0.000" || r.Since != "2026-12-02T22:00:00Z" {
			t.Fatalf("no history: %+v", r)
		}
	}
}

// mustParseSince is parseSince at savingsNow.
func mustParseSince(t *testing.T, in string) time.Time {
	t.Helper()
	since, err := parseSince(in, savingsNow)
	if err != nil {
		t.Fatal(err)
	}
	return since
}

// TestSavingsSinceHostileInput: --since is the user's; a future, negative,
// malformed or overlong value is refused before anything is read.
func TestSavingsSinceHostileInput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{in: "36h", want: savingsNow.Add(-36 * time.Hour)},
		{in: "7d", want: savingsNow.AddDate(0, 0, -7)},
		{in: "2026-12-01", want: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-12-01T20:00:00+01:00", want: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)},
		{in: "0s", want: savingsNow},
		{in: "-5h", err: "negative"},
		{in: "-7d", err: "want a duration"},
		{in: "99999d", err: "number of days"},
		{in: "2099-01-01", err: "in the future"},
		{in: "1h\x1b[2J", err: "want a duration"},
		{in: "yesterday", err: "want a duration"},
		{in: strings.Repeat("9", 100) + "h", err: "longer than"},
	} {
		got, err := parseSince(tc.in, savingsNow)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !got.Equal(tc.want)):
			t.Errorf("%q: %s %v, want %s", tc.in, got, err, tc.want)
		}
	}
	// Through the command: refused before any cluster is looked for (the
	// kubeconfig named does not exist).
	root := newRootCommand(&environment{now: func() time.Time { return savingsNow }})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"--kubeconfig", t.TempDir() + "/none", "savings", "--since", "2099-01-01"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "in the future") {
		t.Fatalf("command: %v %s", err, out.String())
	}
}
