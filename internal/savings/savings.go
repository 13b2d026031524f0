// Package savings is the arithmetic of the NSScaler savings report: what a
// parked workload would have requested per hour (Rate), how a closed parked
// interval adds to the totals (Accrue), and how a reader extrapolates the
// open interval from the recorded rate and its start (Extrapolate). The
// controller, the metrics and kubectl-runbook share it so that they agree to
// the last digit.
package savings

import (
	"math"
	"math/big"
	"time"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// Scale is the number of decimals the totals keep: the finest a
// resource.Quantity serializes (nano). Each closed interval is rounded once
// (half up), so a total is off by at most half a nano-unit per transition.
const Scale = 9

// Requests are one pod's effective requests.
type Requests struct {
	MilliCPU int64
	MemBytes int64
}

// Rate is what a set of parked workloads would run at once: pods, CPU in
// millicores, memory in bytes.
type Rate struct {
	Pods     int64
	MilliCPU int64
	MemBytes int64
}

// IsZero: nothing is saved.
func (r Rate) IsZero() bool { return r == Rate{} }

// Add is r plus o.
func (r Rate) Add(o Rate) Rate {
	return Rate{Pods: addSat(r.Pods, o.Pods), MilliCPU: addSat(r.MilliCPU, o.MilliCPU), MemBytes: addSat(r.MemBytes, o.MemBytes)}
}

// Of is what replicas pods of requests r would request.
func (r Requests) Of(replicas int64) Rate {
	if replicas <= 0 {
		return Rate{}
	}
	return Rate{Pods: replicas, MilliCPU: mulSat(replicas, r.MilliCPU), MemBytes: mulSat(replicas, r.MemBytes)}
}

// addSat and mulSat stop at math.MaxInt64 (operands are never negative):
// whoever may edit a workload chooses its requests, and an absurd one must
// saturate its namespace's report, not wrap it around into another value.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// PodRequests are the effective requests of a pod built from spec, as the
// scheduler counts them: the larger of (a) the app containers plus the
// restartable init containers (sidecars) and (b) the largest regular init
// container plus the sidecars started before it. A container without a
// request for a resource but with a limit requests its limit (the Pod
// defaulting the apiserver applies when it creates the pods). Pod overhead
// (RuntimeClass) is not in the template and is not counted.
func PodRequests(spec *corev1.PodSpec) Requests {
	var app, sidecars, initPeak Requests
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		r := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = sum(sidecars, r)
			continue
		}
		initPeak = peak(initPeak, sum(r, sidecars))
	}
	for i := range spec.Containers {
		app = sum(app, containerRequests(&spec.Containers[i]))
	}
	return peak(sum(app, sidecars), initPeak)
}

func containerRequests(c *corev1.Container) Requests {
	get := func(name corev1.ResourceName) *resource.Quantity {
		if q, ok := c.Resources.Requests[name]; ok {
			return &q
		}
		if q, ok := c.Resources.Limits[name]; ok {
			return &q
		}
		return nil
	}
	var r Requests
	// Quantities beyond int64 and negative ones (the apiserver rejects
	// them in pods, not always in templates) are bounded here.
	if q := get(corev1.ResourceCPU); q != nil {
		r.MilliCPU = max(0, q.MilliValue())
	}
	if q := get(corev1.ResourceMemory); q != nil {
		r.MemBytes = max(0, q.Value())
	}
	return r
}

func sum(a, b Requests) Requests {
	return Requests{MilliCPU: addSat(a.MilliCPU, b.MilliCPU), MemBytes: addSat(a.MemBytes, b.MemBytes)}
}

func peak(a, b Requests) Requests {
	return Requests{MilliCPU: max(a.MilliCPU, b.MilliCPU), MemBytes: max(a.MemBytes, b.MemBytes)}
}

// Instant is t as the status records it (whole seconds): every interval is
// measured between two such instants, so nothing is lost or counted twice
// to the truncation.
func Instant(t time.Time) time.Time { return t.Truncate(time.Second) }

// Denominators turning seconds × base units into the report's units.
var (
	perHour       = big.NewInt(3600)
	perCoreHour   = big.NewInt(1000 * 3600)
	perGiBHour    = new(big.Int).Mul(big.NewInt(1<<30), big.NewInt(3600))
	nanoPerUnit   = new(big.Int).Exp(big.NewInt(10), big.NewInt(Scale), nil)
	halfNanoRound = big.NewInt(2)
)

// Accrue adds rate × (to − from) to totals; an empty or negative interval
// adds nothing.
func Accrue(totals scalingv1alpha1.SavingsTotals, rate Rate, from, to time.Time) scalingv1alpha1.SavingsTotals {
	seconds := int64(Instant(to).Sub(Instant(from)) / time.Second)
	if seconds <= 0 || rate.IsZero() {
		return totals
	}
	return scalingv1alpha1.SavingsTotals{
		PodHours:       addRatio(totals.PodHours, rate.Pods, seconds, perHour),
		CPUCoreHours:   addRatio(totals.CPUCoreHours, rate.MilliCPU, seconds, perCoreHour),
		MemoryGiBHours: addRatio(totals.MemoryGiBHours, rate.MemBytes, seconds, perGiBHour),
	}
}

// addRatio is q + amount × seconds / den, the addend rounded half up to
// Scale decimals.
func addRatio(q resource.Quantity, amount, seconds int64, den *big.Int) resource.Quantity {
	num := new(big.Int).Mul(big.NewInt(amount), big.NewInt(seconds))
	num.Mul(num, nanoPerUnit)
	// Half up: (2·num + den) / (2·den).
	num.Mul(num, halfNanoRound).Add(num, den)
	scaled := num.Quo(num, new(big.Int).Mul(den, halfNanoRound))
	total := new(inf.Dec).Add(q.AsDec(), inf.NewDecBig(scaled, Scale))
	return Quantity(total)
}

// Quantity is d as a canonical decimal quantity.
func Quantity(d *inf.Dec) resource.Quantity {
	q := resource.NewDecimalQuantity(*d, resource.DecimalSI)
	// Round-trip through the canonical form, so that a total computed here
	// equals the one read back from the status.
	return resource.MustParse(q.String())
}

// RateOf reads a recorded rate.
func RateOf(r scalingv1alpha1.SavingsRate) Rate {
	return Rate{Pods: r.Pods, MilliCPU: r.CPU.MilliValue(), MemBytes: r.Memory.Value()}
}

// StatusRate is r as the status records it.
func StatusRate(r Rate) scalingv1alpha1.SavingsRate {
	return scalingv1alpha1.SavingsRate{
		Pods:   r.Pods,
		CPU:    *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI),
		Memory: *resource.NewQuantity(r.MemBytes, resource.BinarySI),
	}
}

// Namespace is a namespace's totals at now: its closed intervals plus the
// open one, extrapolated from the recorded rate and its start.
func Namespace(ns scalingv1alpha1.NamespaceSavings, now time.Time) scalingv1alpha1.SavingsTotals {
	if ns.RateSince == nil {
		return ns.SavingsTotals
	}
	return Accrue(ns.SavingsTotals, RateOf(ns.CurrentRate), ns.RateSince.Time, now)
}

// Total is an NSScaler's totals at now: the recorded total (every closed
// interval, including those of namespaces no longer listed) plus each
// listed namespace's open interval.
func Total(s *scalingv1alpha1.SavingsStatus, now time.Time) scalingv1alpha1.SavingsTotals {
	if s == nil {
		return scalingv1alpha1.SavingsTotals{}
	}
	t := s.SavingsTotals
	for _, ns := range s.Namespaces {
		if ns.RateSince != nil {
			t = Accrue(t, RateOf(ns.CurrentRate), ns.RateSince.Time, now)
		}
	}
	return t
}

// Money prices totals and a rate per hour with prices (nil: no money).
func Money(prices *scalingv1alpha1.SavingsPrices, totals scalingv1alpha1.SavingsTotals, rate Rate) *scalingv1alpha1.SavingsMoney {
	if prices == nil {
		return nil
	}
	hour := time.Unix(3600, 0)
	perHour := Accrue(scalingv1alpha1.SavingsTotals{}, rate, time.Unix(0, 0), hour)
	return &scalingv1alpha1.SavingsMoney{
		Currency: prices.Currency,
		Total:    price(prices, totals),
		PerHour:  price(prices, perHour),
	}
}

func price(prices *scalingv1alpha1.SavingsPrices, t scalingv1alpha1.SavingsTotals) resource.Quantity {
	total := new(inf.Dec)
	add := func(amount resource.Quantity, unit *resource.Quantity) {
		if unit != nil {
			u := unit.DeepCopy() // AsDec converts its receiver's representation
			total.Add(total, new(inf.Dec).Mul(amount.AsDec(), u.AsDec()))
		}
	}
	add(t.CPUCoreHours, prices.CPUCoreHour)
	add(t.MemoryGiBHours, prices.MemoryGiBHour)
	// Money is shown to the cent's fraction, not to the nano-unit.
	total.Round(total, 6, inf.RoundHalfUp)
	return Quantity(total)
}
