package nsscaler

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

func expectDays(t *testing.T, what string, got []scalingv1alpha1.DailySavings, want ...scalingv1alpha1.DailySavings) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d days %+v, want %d", what, len(got), got, len(want))
	}
	for i := range want {
		if got[i].Day != want[i].Day {
			t.Fatalf("%s: day %d is %s, want %s", what, i, got[i].Day, want[i].Day)
		}
		expectTotals(t, what+" "+want[i].Day, got[i].SavingsTotals, want[i].SavingsTotals)
	}
}

func daily(day, pod, cpu, mem string) scalingv1alpha1.DailySavings {
	return scalingv1alpha1.DailySavings{Day: day, SavingsTotals: mustTotals(pod, cpu, mem)}
}

// A park at 20:00 UTC restored at 02:00 the next day: the closed interval
// goes 4 hours to the first day and 2 to the second, for the namespace and
// the NSScaler, in the restore's write; reconciles in between (a restarted
// manager's included) change nothing.
func TestNextSavingsDailyAcrossMidnight(t *testing.T) {
	rate := savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	owned := sets.New("a")
	parked := nextSavings(nil, map[string]savings.Rate{"a": rate}, owned, savingsT0, nil)
	if parked.DailyFrom == nil || !parked.DailyFrom.Time.Equal(savingsT0) || !parked.NamespaceDailyFrom.Time.Equal(savingsT0) || parked.Daily != nil {
		t.Fatalf("at the park: from %v / %v, days %+v", parked.DailyFrom, parked.NamespaceDailyFrom, parked.Daily)
	}
	for _, at := range []time.Duration{3 * time.Hour, 5 * time.Hour} { // before and after midnight
		if again := nextSavings(parked.DeepCopy(), map[string]savings.Rate{"a": rate}, owned, savingsT0.Add(at), nil); !equality.Semantic.DeepEqual(again, parked) {
			t.Fatalf("status moved %s into the park", at)
		}
	}
	restored := nextSavings(parked.DeepCopy(), nil, owned, savingsT0.Add(6*time.Hour), nil)
	want := []scalingv1alpha1.DailySavings{daily("2026-12-01", "12", "3", "1.5"), daily("2026-12-02", "6", "1.5", "0.75")}
	expectDays(t, "NSScaler", restored.Daily, want...)
	expectDays(t, "namespace", restored.Namespaces[0].Daily, want...)
	expectTotals(t, "the days add up to the total", savings.SumDays(restored.Daily, savingsT0), restored.SavingsTotals)
}

// A report written before the history existed starts it at the first write
// that keeps one: the part of an open interval before it is in the totals
// only (no day gets what a --since could count twice).
func TestNextSavingsDailyStartsOnUpgrade(t *testing.T) {
	rate := savings.Requests{MilliCPU: 1000, MemBytes: 1 << 30}.Of(1)
	owned := sets.New("a")
	old := nextSavings(nil, map[string]savings.Rate{"a": rate}, owned, savingsT0, nil)
	old.DailyFrom, old.NamespaceDailyFrom = nil, nil

	upgraded := nextSavings(old.DeepCopy(), map[string]savings.Rate{"a": rate}, owned, savingsT0.Add(time.Hour), nil)
	if !upgraded.DailyFrom.Time.Equal(savingsT0.Add(time.Hour)) {
		t.Fatalf("from %v", upgraded.DailyFrom)
	}
	restored := nextSavings(upgraded, nil, owned, savingsT0.Add(3*time.Hour), nil)
	expectTotals(t, "totals", restored.SavingsTotals, mustTotals("3", "3", "3"))
	expectDays(t, "days from the upgrade", restored.Daily, daily("2026-12-01", "2", "2", "2"))
}

// Days older than savings.HistoryDays go at the next write that closes an
// interval (never because time passes), and dailyFrom moves with them.
func TestNextSavingsDailyKeepsHistoryDays(t *testing.T) {
	rate := savings.Requests{MilliCPU: 1000, MemBytes: 1 << 30}.Of(1)
	owned := sets.New("a")
	s := nextSavings(nil, map[string]savings.Rate{"a": rate}, owned, savingsT0, nil)
	s = nextSavings(s, nil, owned, savingsT0.Add(time.Hour), nil)
	later := savingsT0.AddDate(0, 0, savings.HistoryDays)
	if again := nextSavings(s.DeepCopy(), nil, owned, later, nil); !equality.Semantic.DeepEqual(again, s) {
		t.Fatal("time passing alone changed the status")
	}
	s = nextSavings(s, map[string]savings.Rate{"a": rate}, owned, later, nil)
	s = nextSavings(s, nil, owned, later.Add(time.Hour), nil)
	cutoff := savings.DayStart(later).AddDate(0, 0, -(savings.HistoryDays - 1))
	if !s.DailyFrom.Time.Equal(cutoff) || !s.NamespaceDailyFrom.Time.Equal(cutoff) {
		t.Fatalf("from %s / %s, want %s", s.DailyFrom, s.NamespaceDailyFrom, cutoff)
	}
	day := later.Format(savings.DayLayout)
	expectDays(t, "NSScaler", s.Daily, daily(day, "1", "1", "1"))
	expectDays(t, "namespace", s.Namespaces[0].Daily, daily(day, "1", "1", "1"))
	expectTotals(t, "totals keep everything", s.SavingsTotals, mustTotals("2", "2", "2"))
}

// With more namespaces than maxNamespaceDaily entries allow, the oldest
// days of every namespace go first; the NSScaler's days stay whole and
// namespaceDailyFrom says where the namespaces' history begins.
func TestNextSavingsDailyBoundsTheNamespaces(t *testing.T) {
	rate := savings.Requests{MilliCPU: 1000, MemBytes: 1 << 30}.Of(1)
	n := maxNamespaceDaily/2 + 1 // two days each are one day too many
	owned := sets.New[string]()
	parked := map[string]savings.Rate{}
	for i := range n {
		ns := fmt.Sprintf("ns-%04d", i)
		owned.Insert(ns)
		parked[ns] = rate
	}
	s := nextSavings(nil, parked, owned, savingsT0, nil)
	s = nextSavings(s, nil, owned, savingsT0.Add(time.Hour), nil)
	s = nextSavings(s, parked, owned, savingsT0.Add(24*time.Hour), nil)
	s = nextSavings(s, nil, owned, savingsT0.Add(25*time.Hour), nil)
	count := 0
	for _, ns := range s.Namespaces {
		count += len(ns.Daily)
		expectDays(t, ns.Namespace, ns.Daily, daily("2026-12-02", "1", "1", "1"))
	}
	if count > maxNamespaceDaily {
		t.Fatalf("%d namespace entries", count)
	}
	nextDay := metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	if !s.NamespaceDailyFrom.Equal(&nextDay) || !s.DailyFrom.Time.Equal(savingsT0) {
		t.Fatalf("from %s / namespaces %s", s.DailyFrom, s.NamespaceDailyFrom)
	}
	all := fmt.Sprint(n)
	expectDays(t, "NSScaler", s.Daily, daily("2026-12-01", all, all, all), daily("2026-12-02", all, all, all))

	// A single day over the bound: the namespaces keep nothing, and their
	// history starts at that write.
	bigger := map[string]savings.Rate{}
	for i := range maxNamespaceDaily + 1 {
		ns := fmt.Sprintf("big-%04d", i)
		owned.Insert(ns)
		bigger[ns] = rate
	}
	at := savingsT0.Add(48 * time.Hour)
	s = nextSavings(s, bigger, owned, at, nil)
	s = nextSavings(s, nil, owned, at.Add(time.Hour), nil)
	for _, ns := range s.Namespaces {
		if len(ns.Daily) != 0 {
			t.Fatalf("%s kept %+v", ns.Namespace, ns.Daily)
		}
	}
	if !s.NamespaceDailyFrom.Time.Equal(at.Add(time.Hour)) {
		t.Fatalf("namespaces from %s", s.NamespaceDailyFrom)
	}
}
