package nsscaler

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

func TestSavedRate(t *testing.T) {
	small := savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}
	three := ReplicasOriginal(3, "me")
	deploy := Workload{Kind: kindDeployment, Requests: small, Replicas: 0}
	for _, tc := range []struct {
		name string
		w    Workload
		d    Decision
		want savings.Rate
	}{
		{"held parked: the recorded original counts", deploy, Decision{Target: true, Original: three}, small.Of(3)},
		{"parked now: the original being recorded counts", Workload{Kind: kindStatefulSet, Requests: small, Replicas: 3}, Decision{Action: ActionPark, Target: true, Record: &three}, small.Of(3)},
		{"parked to N: the replicas above N count", deploy, Decision{Target: true, Original: three, Keep: 1}, small.Of(2)},
		{"left at N: nothing", Workload{Kind: kindDeployment, Requests: small, Replicas: 1}, Decision{Keep: 1, AtOrBelow: true}, savings.Rate{}},
		{"not a target: nothing", deploy, Decision{Action: ActionRestore, Original: three}, savings.Rate{}},
		{"a CronJob: nothing", Workload{Kind: kindCronJob, Requests: small}, Decision{Target: true, Original: SuspendOriginal(false, "me")}, savings.Rate{}},
		{"a custom kind: nothing", Workload{Kind: KindKey{Group: "x.io", Kind: "Widget"}, Requests: small}, Decision{Target: true, Original: three}, savings.Rate{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &workloadPass{}
			if got := p.savedRate(tc.w, tc.d); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

var savingsT0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func mustTotals(pod, cpu, mem string) scalingv1alpha1.SavingsTotals {
	return scalingv1alpha1.SavingsTotals{PodHours: resource.MustParse(pod), CPUCoreHours: resource.MustParse(cpu), MemoryGiBHours: resource.MustParse(mem)}
}

func expectTotals(t *testing.T, what string, got, want scalingv1alpha1.SavingsTotals) {
	t.Helper()
	if got.PodHours.Cmp(want.PodHours) != 0 || got.CPUCoreHours.Cmp(want.CPUCoreHours) != 0 || got.MemoryGiBHours.Cmp(want.MemoryGiBHours) != 0 {
		t.Fatalf("%s: pods %s cpu %s mem %s, want %s %s %s", what, &got.PodHours, &got.CPUCoreHours, &got.MemoryGiBHours,
			&want.PodHours, &want.CPUCoreHours, &want.MemoryGiBHours)
	}
}

// A park, two hours, a restore: 1.5 core-hours; the status changes only at
// the two transitions, and a controller that restarted in between (it
// reads the rate and its start back from the status) counts nothing twice.
func TestNextSavingsAcrossParkRestartRestore(t *testing.T) {
	rate := savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	owned := sets.New("a", "b")
	parked := map[string]savings.Rate{"a": rate}

	if s := nextSavings(nil, nil, owned, savingsT0, nil); s != nil {
		t.Fatalf("a report before anything was parked: %+v", s)
	}
	atPark := nextSavings(nil, parked, owned, savingsT0, nil)
	if !atPark.Since.Time.Equal(savingsT0) || len(atPark.Namespaces) != 1 || atPark.CurrentRate.Pods != 3 ||
		atPark.CurrentRate.CPU.Cmp(resource.MustParse("750m")) != 0 || atPark.CurrentRate.Memory.Cmp(resource.MustParse("384Mi")) != 0 {
		t.Fatalf("at the park: %+v", atPark)
	}

	// Reconciles while parked — the same controller, or one that restarted
	// and read the status back — change nothing.
	for _, at := range []time.Duration{time.Minute, time.Hour, 90 * time.Minute} {
		again := nextSavings(atPark.DeepCopy(), parked, owned, savingsT0.Add(at), nil)
		if !equality.Semantic.DeepEqual(again, atPark) {
			t.Fatalf("status moved %s into the park:\n%+v\n%+v", at, again, atPark)
		}
	}
	expectTotals(t, "extrapolated after 1h", savings.Total(atPark, savingsT0.Add(time.Hour)), mustTotals("3", "0.75", "0.375"))

	restored := nextSavings(atPark.DeepCopy(), nil, owned, savingsT0.Add(2*time.Hour), nil)
	expectTotals(t, "NSScaler", restored.SavingsTotals, mustTotals("6", "1.5", "0.75"))
	ns := restored.Namespaces[0]
	expectTotals(t, "namespace", ns.SavingsTotals, mustTotals("6", "1.5", "0.75"))
	if ns.RateSince != nil || ns.CurrentRate.Pods != 0 || restored.CurrentRate.Pods != 0 {
		t.Fatalf("after the restore the rate is %+v since %v", ns.CurrentRate, ns.RateSince)
	}
	// Time passing while awake adds nothing.
	expectTotals(t, "awake a day later", savings.Total(restored, savingsT0.Add(26*time.Hour)), mustTotals("6", "1.5", "0.75"))
	if again := nextSavings(restored.DeepCopy(), nil, owned, savingsT0.Add(26*time.Hour), nil); !equality.Semantic.DeepEqual(again, restored) {
		t.Fatalf("status moved while awake")
	}
}

// A rate that changes closes the interval at the old rate.
func TestNextSavingsRateChange(t *testing.T) {
	one := savings.Requests{MilliCPU: 1000, MemBytes: 1 << 30}
	owned := sets.New("a")
	s := nextSavings(nil, map[string]savings.Rate{"a": one.Of(1)}, owned, savingsT0, nil)
	s = nextSavings(s, map[string]savings.Rate{"a": one.Of(3)}, owned, savingsT0.Add(time.Hour), nil)
	expectTotals(t, "closed hour", s.SavingsTotals, mustTotals("1", "1", "1"))
	if !s.Namespaces[0].RateSince.Time.Equal(savingsT0.Add(time.Hour)) || s.CurrentRate.Pods != 3 {
		t.Fatalf("new interval %+v", s.Namespaces[0])
	}
	expectTotals(t, "one more hour at 3", savings.Total(s, savingsT0.Add(2*time.Hour)), mustTotals("4", "4", "4"))
}

// A namespace the NSScaler no longer owns leaves the list once nothing is
// parked in it; its totals stay in the NSScaler's.
func TestNextSavingsFoldsNamespacesNoLongerOwned(t *testing.T) {
	one := savings.Requests{MilliCPU: 1000, MemBytes: 1 << 30}
	s := nextSavings(nil, map[string]savings.Rate{"a": one.Of(1), "b": one.Of(2)}, sets.New("a", "b"), savingsT0, nil)
	s = nextSavings(s, map[string]savings.Rate{"b": one.Of(2)}, sets.New("b"), savingsT0.Add(time.Hour), nil)
	if len(s.Namespaces) != 1 || s.Namespaces[0].Namespace != "b" {
		t.Fatalf("namespaces %+v", s.Namespaces)
	}
	expectTotals(t, "NSScaler keeps a's hour", s.SavingsTotals, mustTotals("1", "1", "1"))
	expectTotals(t, "with b's open hour", savings.Total(s, savingsT0.Add(2*time.Hour)), mustTotals("5", "5", "5"))
}

func TestNextSavingsPrices(t *testing.T) {
	rate := savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	prices := &scalingv1alpha1.SavingsPrices{Currency: "EUR", CPUCoreHour: ptr.To(resource.MustParse("0.04"))}
	s := nextSavings(nil, map[string]savings.Rate{"a": rate}, sets.New("a"), savingsT0, prices)
	s = nextSavings(s, nil, sets.New("a"), savingsT0.Add(2*time.Hour), prices)
	if s.Money == nil || s.Money.Currency != "EUR" || s.Money.Total.Cmp(resource.MustParse("0.06")) != 0 {
		t.Fatalf("money %+v", s.Money)
	}
	if again := nextSavings(s, nil, sets.New("a"), savingsT0.Add(3*time.Hour), nil); again.Money != nil {
		t.Fatalf("money without prices: %+v", again.Money)
	}
}

// The counters are computed at the scrape from the last status: they grow
// with the clock without a status write, and continue across a new
// collector (a restarted manager) from the status's totals.
func TestSavedCounters(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(savingsT0)
	rate := savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	s := nextSavings(nil, map[string]savings.Rate{"team-a": rate}, sets.New("team-a"), savingsT0, nil)
	for restart := range 2 {
		c := newSavedCollector()
		c.setClock(clk)
		c.set("nights", s)
		clk.SetTime(savingsT0.Add(time.Duration(restart+1) * time.Hour))
		want := []string{
			`runbook_nsscaler_saved_cpu_core_hours_total{namespace="team-a",nsscaler="nights"} ` + []string{"0.75", "1.5"}[restart],
			`runbook_nsscaler_saved_pod_hours_total{namespace="team-a",nsscaler="nights"} ` + []string{"3", "6"}[restart],
			`runbook_nsscaler_saved_memory_gib_hours_total{namespace="team-a",nsscaler="nights"} ` + []string{"0.375", "0.75"}[restart],
		}
		got := gather(t, c)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Fatalf("after restart %d, missing %q in\n%s", restart, w, got)
			}
		}
		c.set("nights", nil)
		if n := strings.Count(gather(t, c), "\n"); n != 0 {
			t.Fatalf("%d series after the NSScaler went", n)
		}
	}
}

func gather(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName() + "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
			}
			b.WriteString("} " + strings.TrimRight(strings.TrimRight(fmtFloat(m.GetCounter().GetValue()), "0"), ".") + "\n")
		}
	}
	return b.String()
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', 6, 64) }
