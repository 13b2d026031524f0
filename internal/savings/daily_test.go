package savings

import (
	"testing"
	"time"
	_ "time/tzdata" // the zone database, whatever the machine has

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func sameDays(t *testing.T, got []scalingv1alpha1.DailySavings, want map[string]scalingv1alpha1.SavingsTotals, order ...string) {
	t.Helper()
	if len(got) != len(order) {
		t.Fatalf("got %d days %+v, want %v", len(got), got, order)
	}
	for i, d := range got {
		if d.Day != order[i] {
			t.Fatalf("day %d is %s, want %s", i, d.Day, order[i])
		}
		sameTotals(t, d.SavingsTotals, want[d.Day])
	}
}

// 3 pods of 250m/128Mi parked from 20:00 to 02:00 UTC: 4 hours on the first
// day, 2 on the second, and the whole equal to the totals' single interval.
func TestAccrueDailySplitsAtUTCMidnight(t *testing.T) {
	r := Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	from := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	days := AccrueDaily(nil, r, from, from.Add(6*time.Hour))
	sameDays(t, days, map[string]scalingv1alpha1.SavingsTotals{
		"2026-12-02": totals("12", "3", "1.5"),
		"2026-12-03": totals("6", "1.5", "0.75"),
	}, "2026-12-02", "2026-12-03")
	sameTotals(t, SumDays(days, from), Accrue(scalingv1alpha1.SavingsTotals{}, r, from, from.Add(6*time.Hour)))
	// A second interval on the second day adds to its entry; one three
	// days earlier is inserted in order.
	days = AccrueDaily(days, r, from.Add(10*time.Hour), from.Add(11*time.Hour))
	days = AccrueDaily(days, r, from.Add(-72*time.Hour), from.Add(-71*time.Hour))
	sameDays(t, days, map[string]scalingv1alpha1.SavingsTotals{
		"2026-11-29": totals("3", "0.75", "0.375"),
		"2026-12-02": totals("12", "3", "1.5"),
		"2026-12-03": totals("9", "2.25", "1.125"),
	}, "2026-11-29", "2026-12-02", "2026-12-03")
	// From the second day only.
	sameTotals(t, SumDays(days, from.Add(5*time.Hour)), totals("9", "2.25", "1.125"))
	// Nothing for an empty, backwards or zero-rate interval.
	if got := AccrueDaily(nil, r, from, from); got != nil {
		t.Fatalf("empty interval: %+v", got)
	}
	if got := AccrueDaily(nil, Rate{}, from, from.Add(time.Hour)); got != nil {
		t.Fatalf("zero rate: %+v", got)
	}
}

// The days are UTC days: an interval given in a zone with a daylight-saving
// change (Europe/Berlin, 25 October 2026, 03:00 CEST → 02:00 CET) is split
// at UTC midnight, and each day holds 24 hours at most.
func TestAccrueDailyIgnoresDaylightSaving(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	r := Rate{Pods: 1, MilliCPU: 1000, MemBytes: 1 << 30}
	// Local midnight to local midnight across the change is 25 hours:
	// 2026-10-24T22:00Z (00:00 CEST) to 2026-10-25T23:00Z (00:00 CET).
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, berlin)
	to := time.Date(2026, 10, 26, 0, 0, 0, 0, berlin)
	if to.Sub(from) != 25*time.Hour {
		t.Fatalf("the zone's day is %s long", to.Sub(from))
	}
	days := AccrueDaily(nil, r, from, to)
	sameDays(t, days, map[string]scalingv1alpha1.SavingsTotals{
		"2026-10-24": totals("2", "2", "2"),
		"2026-10-25": totals("23", "23", "23"),
	}, "2026-10-24", "2026-10-25")
	// A whole UTC day is 24 hours, the day of the change included.
	whole := AccrueDaily(nil, r, time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC))
	sameDays(t, whole, map[string]scalingv1alpha1.SavingsTotals{"2026-10-25": totals("24", "24", "24")}, "2026-10-25")
}

func TestDropBefore(t *testing.T) {
	r := Rate{Pods: 1}
	from := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	days := AccrueDaily(nil, r, from, from.Add(72*time.Hour))
	days = DropBefore(days, from.Add(36*time.Hour)) // 2026-12-03, midday
	if len(days) != 2 || days[0].Day != "2026-12-03" || days[1].Day != "2026-12-04" {
		t.Fatalf("kept %+v", days)
	}
}

// WindowStart rounds since down to its UTC day and says when the history
// kept does not reach it; Since figures add the open interval's part after
// the start.
func TestWindow(t *testing.T) {
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	kept := metav1.NewTime(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	from, beyond := WindowStart(now.Add(-24*time.Hour), &kept, now)
	if !from.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) || beyond {
		t.Fatalf("24h: from %s beyond %v", from, beyond)
	}
	from, beyond = WindowStart(now.Add(-7*24*time.Hour), &kept, now)
	if !from.Equal(kept.Time) || !beyond {
		t.Fatalf("7d: from %s beyond %v", from, beyond)
	}
	from, beyond = WindowStart(now.Add(-time.Hour), nil, now)
	if !from.Equal(now) || !beyond {
		t.Fatalf("nothing kept: from %s beyond %v", from, beyond)
	}

	r := Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	rateSince := metav1.NewTime(time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC))
	ns := scalingv1alpha1.NamespaceSavings{
		Namespace: "a", CurrentRate: StatusRate(r), RateSince: &rateSince,
		Daily: AccrueDaily(nil, r, time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)),
	}
	// Since 2026-12-02: 2 closed hours that day, 6 open hours (20:00 to
	// 02:00): 8 hours of 3 pods.
	sameTotals(t, NamespaceSince(ns, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), now), totals("24", "6", "3"))
	// Since 2026-12-03: the open interval's 2 hours of that day only.
	sameTotals(t, NamespaceSince(ns, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), now), totals("6", "1.5", "0.75"))
	s := &scalingv1alpha1.SavingsStatus{Daily: ns.Daily, Namespaces: []scalingv1alpha1.NamespaceSavings{ns}}
	sameTotals(t, TotalSince(s, kept.Time, now), totals("36", "9", "4.5"))
	sameTotals(t, TotalSince(nil, kept.Time, now), scalingv1alpha1.SavingsTotals{})
}
