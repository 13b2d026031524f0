package nsscaler

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

// The savings report (status.savings) is kept by intervals: each namespace
// records what is parked in it now (a rate) and since when; when the rate
// changes — a park, a restore, a workload added or resized while parked —
// the interval that ends is added to the namespace's and the NSScaler's
// totals, in the same status write that records the new rate. The status is
// thus written only at those transitions, never because time passes; the
// open interval is for readers to add (savings.Namespace).
//
// A manager that restarts reads the rate and its start back from the
// status: the interval in progress is neither lost nor counted twice. What
// can be lost is the time between a park write and the status write that
// follows it, if the manager dies in between: the rate then starts at the
// next status write (an undercount, never a double count).

// savedRate is what a workload held parked by this decision does not run:
// its recorded original replicas, less those it keeps parked (d.Keep:
// spec.parkedReplicas), times one pod's requests. Only Deployments and StatefulSets are counted
// (a CronJob's pods come and go; a custom resource's or a KEDA target's pod
// template is not read).
func (p *workloadPass) savedRate(w Workload, d Decision) savings.Rate {
	if !d.Target || (w.Kind != kindDeployment && w.Kind != kindStatefulSet) {
		return savings.Rate{}
	}
	orig := d.Original
	if d.Record != nil {
		orig = *d.Record
	}
	if orig.Replicas == nil {
		return savings.Rate{}
	}
	return w.Requests.Of(int64(*orig.Replicas) - int64(d.Keep))
}

// addSaved counts a workload held parked into its namespace's rate.
func (o *observation) addSaved(namespace string, r savings.Rate) {
	if r.IsZero() {
		return
	}
	if o.saved == nil {
		o.saved = map[string]savings.Rate{}
	}
	o.saved[namespace] = o.saved[namespace].Add(r)
}

// nextSavings is status.savings after a reconcile that saw rates (per
// namespace) at now: equal to prev (nothing to write) unless a rate or the
// prices changed; nil until something is parked. owned are the namespaces the NSScaler owns: a namespace with
// nothing parked keeps its entry while owned, and is folded into the
// NSScaler's totals once it is not (the list stays as long as the
// namespaces the NSScaler selects).
func nextSavings(prev *scalingv1alpha1.SavingsStatus, rates map[string]savings.Rate, owned sets.Set[string], now time.Time, prices *scalingv1alpha1.SavingsPrices) *scalingv1alpha1.SavingsStatus {
	now = savings.Instant(now)
	if prev == nil && len(rates) == 0 {
		// Nothing counted yet: the report starts with the first park.
		return nil
	}
	var out scalingv1alpha1.SavingsStatus
	if prev != nil {
		prev.DeepCopyInto(&out)
	} else {
		out.Since = metav1.NewTime(now)
	}
	startDaily(&out, now)
	closed := false
	listed := sets.New[string]()
	kept := make([]scalingv1alpha1.NamespaceSavings, 0, len(out.Namespaces)+len(rates))
	var sum savings.Rate
	for _, ns := range out.Namespaces {
		listed.Insert(ns.Namespace)
		rate := rates[ns.Namespace]
		if old := savings.RateOf(ns.CurrentRate); rate != old {
			if ns.RateSince != nil {
				ns.SavingsTotals = savings.Accrue(ns.SavingsTotals, old, ns.RateSince.Time, now)
				out.SavingsTotals = savings.Accrue(out.SavingsTotals, old, ns.RateSince.Time, now)
				closeDaily(&out, &ns, old, ns.RateSince.Time, now)
				closed = true
			}
			ns.CurrentRate, ns.RateSince = openInterval(rate, now)
		}
		if rate.IsZero() && !owned.Has(ns.Namespace) {
			continue
		}
		sum = sum.Add(rate)
		kept = append(kept, ns)
	}
	for name, rate := range rates {
		if listed.Has(name) || rate.IsZero() {
			continue
		}
		ns := scalingv1alpha1.NamespaceSavings{Namespace: name}
		ns.CurrentRate, ns.RateSince = openInterval(rate, now)
		sum = sum.Add(rate)
		kept = append(kept, ns)
	}
	slices.SortFunc(kept, func(a, b scalingv1alpha1.NamespaceSavings) int { return cmp.Compare(a.Namespace, b.Namespace) })
	out.Namespaces = nil
	if len(kept) > 0 {
		out.Namespaces = kept
	}
	if closed {
		boundDaily(&out, now)
	}
	out.CurrentRate = savings.StatusRate(sum)
	out.Money = savings.Money(prices, out.SavingsTotals, sum)
	return &out
}

// openInterval is a namespace's rate from now (no start when nothing is
// parked).
func openInterval(rate savings.Rate, now time.Time) (scalingv1alpha1.SavingsRate, *metav1.Time) {
	if rate.IsZero() {
		return savings.StatusRate(rate), nil
	}
	since := metav1.NewTime(now)
	return savings.StatusRate(rate), &since
}
