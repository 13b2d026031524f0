package savings

import (
	"slices"
	"strings"
	"time"

	"gopkg.in/inf.v0"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// The daily history: the closed intervals are also added, split at UTC
// midnights, to one entry per UTC day. UTC days are always 24 hours long,
// so no daylight-saving change moves or stretches a bucket; a reader asking
// "since" gets whole UTC days.

// DayLayout is how a day is named (DailySavings.Day).
const DayLayout = "2006-01-02"

// HistoryDays is how many UTC days the daily entries keep, today included.
const HistoryDays = 35

// DayStart is the start of the UTC day holding t.
func DayStart(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
}

// AccrueDaily adds rate × the part of [from, to) in each UTC day to that
// day's entry of days (sorted by day, a day without one saved nothing),
// creating the entries it needs. Each day's part is rounded once, as
// Accrue rounds an interval.
func AccrueDaily(days []scalingv1alpha1.DailySavings, rate Rate, from, to time.Time) []scalingv1alpha1.DailySavings {
	from, to = Instant(from), Instant(to)
	if rate.IsZero() || !to.After(from) {
		return days
	}
	for start := from; start.Before(to); {
		end := DayStart(start).Add(24 * time.Hour)
		if end.After(to) {
			end = to
		}
		name := start.UTC().Format(DayLayout)
		i, found := slices.BinarySearchFunc(days, name, func(d scalingv1alpha1.DailySavings, n string) int { return strings.Compare(d.Day, n) })
		if !found {
			days = slices.Insert(days, i, scalingv1alpha1.DailySavings{Day: name})
		}
		days[i].SavingsTotals = Accrue(days[i].SavingsTotals, rate, start, end)
		start = end
	}
	return days
}

// DropBefore removes the entries of the days before the UTC day holding t.
func DropBefore(days []scalingv1alpha1.DailySavings, t time.Time) []scalingv1alpha1.DailySavings {
	first := t.UTC().Format(DayLayout)
	return slices.DeleteFunc(days, func(d scalingv1alpha1.DailySavings) bool { return d.Day < first })
}

// AddTotals is a plus b.
func AddTotals(a, b scalingv1alpha1.SavingsTotals) scalingv1alpha1.SavingsTotals {
	return scalingv1alpha1.SavingsTotals{
		PodHours:       Quantity(new(inf.Dec).Add(a.PodHours.AsDec(), b.PodHours.AsDec())),
		CPUCoreHours:   Quantity(new(inf.Dec).Add(a.CPUCoreHours.AsDec(), b.CPUCoreHours.AsDec())),
		MemoryGiBHours: Quantity(new(inf.Dec).Add(a.MemoryGiBHours.AsDec(), b.MemoryGiBHours.AsDec())),
	}
}

// SumDays is the sum of the entries from the UTC day holding from.
func SumDays(days []scalingv1alpha1.DailySavings, from time.Time) scalingv1alpha1.SavingsTotals {
	first := from.UTC().Format(DayLayout)
	var t scalingv1alpha1.SavingsTotals
	for _, d := range days {
		if d.Day >= first {
			t = AddTotals(t, d.SavingsTotals)
		}
	}
	return t
}

// WindowStart is where figures "since" can start given history kept from
// kept (nil: none kept yet, so from now): the start of since's UTC day, or
// kept when later. beyond says the history does not reach the day start.
func WindowStart(since time.Time, kept *metav1.Time, now time.Time) (from time.Time, beyond bool) {
	from = DayStart(since)
	k := Instant(now)
	if kept != nil {
		k = Instant(kept.Time)
	}
	if k.After(from) {
		return k, true
	}
	return from, false
}

// NamespaceSince is a namespace's savings from from (a WindowStart) to now:
// its daily entries of those days plus the part of its open interval after
// from.
func NamespaceSince(ns scalingv1alpha1.NamespaceSavings, from, now time.Time) scalingv1alpha1.SavingsTotals {
	t := SumDays(ns.Daily, from)
	if ns.RateSince != nil {
		t = Accrue(t, RateOf(ns.CurrentRate), later(ns.RateSince.Time, from), now)
	}
	return t
}

// TotalSince is an NSScaler's savings from from (a WindowStart of
// s.DailyFrom) to now: its daily entries (every namespace's, those no
// longer listed included) plus each listed namespace's open interval after
// from.
func TotalSince(s *scalingv1alpha1.SavingsStatus, from, now time.Time) scalingv1alpha1.SavingsTotals {
	if s == nil {
		return scalingv1alpha1.SavingsTotals{}
	}
	t := SumDays(s.Daily, from)
	for _, ns := range s.Namespaces {
		if ns.RateSince != nil {
			t = Accrue(t, RateOf(ns.CurrentRate), later(ns.RateSince.Time, from), now)
		}
	}
	return t
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
