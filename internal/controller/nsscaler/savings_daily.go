package nsscaler

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

// The daily history of status.savings (for kubectl runbook savings --since)
// is kept by the same transitions as the totals: an interval that closes is
// added to the totals and, split at UTC midnights, to the daily entries, in
// the same status write. A restarted manager reads them back with the rates;
// nothing is written because a day passes (the open interval's days are the
// reader's, like its total).

// maxNamespaceDaily bounds the daily entries of all the namespaces of one
// NSScaler together: an entry is about 100 bytes of status, so the bound
// keeps the history to about 200 kB however many namespaces an NSScaler
// selects (35 days of 57 namespaces parked every day; with more, fewer
// days). Beyond it the oldest day of every namespace goes first and
// namespaceDailyFrom says from when the namespaces' history is whole; the
// NSScaler's own daily entries (at most savings.HistoryDays) stay.
const maxNamespaceDaily = 2000

// startDaily marks where the daily history begins, for a report that has
// none yet: now (the first park, or the first write of a manager that keeps
// a history; the intervals closed before are in the totals only).
func startDaily(out *scalingv1alpha1.SavingsStatus, now time.Time) {
	if out.DailyFrom == nil {
		from := metav1.NewTime(now)
		out.DailyFrom = &from
	}
	if out.NamespaceDailyFrom == nil || out.NamespaceDailyFrom.Before(out.DailyFrom) {
		from := *out.DailyFrom
		out.NamespaceDailyFrom = &from
	}
}

// closeDaily adds a namespace's closed interval [since, now) at rate to its
// daily entries and to the NSScaler's, each from where its history begins.
func closeDaily(out *scalingv1alpha1.SavingsStatus, ns *scalingv1alpha1.NamespaceSavings, rate savings.Rate, since, now time.Time) {
	ns.Daily = savings.AccrueDaily(ns.Daily, rate, laterOf(since, out.NamespaceDailyFrom.Time), now)
	out.Daily = savings.AccrueDaily(out.Daily, rate, laterOf(since, out.DailyFrom.Time), now)
}

// boundDaily drops the days older than savings.HistoryDays, then the
// oldest days of the namespaces' entries while there are more than
// maxNamespaceDaily. It runs only in a write that closed an interval, so
// that time passing alone never writes the status.
func boundDaily(out *scalingv1alpha1.SavingsStatus, now time.Time) {
	cutoff := savings.DayStart(now).AddDate(0, 0, -(savings.HistoryDays - 1))
	if out.DailyFrom.Time.Before(cutoff) {
		out.DailyFrom = &metav1.Time{Time: cutoff}
		out.Daily = savings.DropBefore(out.Daily, cutoff)
	}
	if out.NamespaceDailyFrom.Time.Before(cutoff) {
		out.NamespaceDailyFrom = &metav1.Time{Time: cutoff}
	}
	days := sets.New[string]()
	count := 0
	for i := range out.Namespaces {
		out.Namespaces[i].Daily = savings.DropBefore(out.Namespaces[i].Daily, out.NamespaceDailyFrom.Time)
		for _, d := range out.Namespaces[i].Daily {
			days.Insert(d.Day)
		}
		count += len(out.Namespaces[i].Daily)
	}
	if count <= maxNamespaceDaily {
		return
	}
	for _, day := range sets.List(days) {
		if count <= maxNamespaceDaily {
			break
		}
		t, err := time.Parse(savings.DayLayout, day)
		if err != nil {
			continue
		}
		// The day after the one dropped, or now when that was today:
		// what closes later is counted from there.
		next := metav1.NewTime(savings.Instant(t.Add(24 * time.Hour)))
		if next.After(now) {
			next = metav1.NewTime(savings.Instant(now))
		}
		out.NamespaceDailyFrom = &next
		for i := range out.Namespaces {
			before := len(out.Namespaces[i].Daily)
			out.Namespaces[i].Daily = savings.DropBefore(out.Namespaces[i].Daily, t.Add(24*time.Hour))
			count -= before - len(out.Namespaces[i].Daily)
		}
	}
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
