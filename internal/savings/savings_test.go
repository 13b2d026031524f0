package savings

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

func container(cpu, mem string) corev1.Container {
	c := corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	if cpu != "" {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return c
}

func sidecar(cpu, mem string) corev1.Container {
	c := container(cpu, mem)
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func TestPodRequests(t *testing.T) {
	limitsOnly := corev1.Container{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
	}}}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want Requests
	}{
		{"no requests", corev1.PodSpec{Containers: []corev1.Container{{}}}, Requests{}},
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{container("250m", "64Mi"), container("750m", "64Mi")}},
			Requests{MilliCPU: 1000, MemBytes: 128 << 20}},
		{"a larger init container wins", corev1.PodSpec{
			InitContainers: []corev1.Container{container("2", "32Mi")},
			Containers:     []corev1.Container{container("500m", "256Mi")}},
			Requests{MilliCPU: 2000, MemBytes: 256 << 20}},
		{"sidecars run with the containers and with later init containers", corev1.PodSpec{
			InitContainers: []corev1.Container{container("1", "1Gi"), sidecar("100m", "100Mi"), container("1", "1Gi")},
			Containers:     []corev1.Container{container("200m", "200Mi")}},
			Requests{MilliCPU: 1100, MemBytes: 1<<30 + 100<<20}},
		{"a limit without a request counts as the request", corev1.PodSpec{Containers: []corev1.Container{limitsOnly}},
			Requests{MilliCPU: 1000, MemBytes: 1 << 30}},
		{"a negative request counts as none", corev1.PodSpec{Containers: []corev1.Container{container("-1", "-1Gi")}}, Requests{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodRequests(&tc.spec); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOfSaturates(t *testing.T) {
	huge := Requests{MilliCPU: math.MaxInt64 / 2, MemBytes: 1 << 62}
	r := huge.Of(math.MaxInt32)
	if r.MilliCPU != math.MaxInt64 || r.MemBytes != math.MaxInt64 || r.Pods != math.MaxInt32 {
		t.Fatalf("got %+v, want saturated", r)
	}
	if s := r.Add(r); s.MilliCPU != math.MaxInt64 || s.Pods != 2*math.MaxInt32 {
		t.Fatalf("sum %+v", s)
	}
	if got := (Requests{MilliCPU: 100}).Of(-2); !got.IsZero() {
		t.Fatalf("negative replicas: %+v", got)
	}
}

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func totals(pod, cpu, mem string) scalingv1alpha1.SavingsTotals {
	return scalingv1alpha1.SavingsTotals{PodHours: resource.MustParse(pod), CPUCoreHours: resource.MustParse(cpu), MemoryGiBHours: resource.MustParse(mem)}
}

func sameTotals(t *testing.T, got, want scalingv1alpha1.SavingsTotals) {
	t.Helper()
	if got.PodHours.Cmp(want.PodHours) != 0 || got.CPUCoreHours.Cmp(want.CPUCoreHours) != 0 || got.MemoryGiBHours.Cmp(want.MemoryGiBHours) != 0 {
		t.Fatalf("got pods %s cpu %s mem %s, want %s %s %s", &got.PodHours, &got.CPUCoreHours, &got.MemoryGiBHours,
			&want.PodHours, &want.CPUCoreHours, &want.MemoryGiBHours)
	}
}

func TestAccrue(t *testing.T) {
	threeSmall := Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	for _, tc := range []struct {
		name     string
		start    scalingv1alpha1.SavingsTotals
		rate     Rate
		from, to time.Time
		want     scalingv1alpha1.SavingsTotals
	}{
		{"3 replicas of 250m and 128Mi for 2h", scalingv1alpha1.SavingsTotals{}, threeSmall, t0, t0.Add(2 * time.Hour), totals("6", "1.5", "0.75")},
		{"added to what was there", totals("1", "1", "1"), threeSmall, t0, t0.Add(2 * time.Hour), totals("7", "2.5", "1.75")},
		{"one second of one core, rounded half up at the nano", scalingv1alpha1.SavingsTotals{}, Rate{Pods: 1, MilliCPU: 1000, MemBytes: 1 << 30},
			t0, t0.Add(time.Second), totals("0.000277778", "0.000277778", "0.000277778")},
		{"instants are whole seconds", scalingv1alpha1.SavingsTotals{}, threeSmall, t0.Add(900 * time.Millisecond), t0.Add(2*time.Hour + 900*time.Millisecond), totals("6", "1.5", "0.75")},
		{"no time, nothing", totals("1", "1", "1"), threeSmall, t0, t0, totals("1", "1", "1")},
		{"backwards, nothing", totals("1", "1", "1"), threeSmall, t0, t0.Add(-time.Hour), totals("1", "1", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameTotals(t, Accrue(tc.start, tc.rate, tc.from, tc.to), tc.want)
		})
	}
}

// Accruing an interval in two halves gives what accruing it whole gives
// when the halves end on whole seconds of an exact rate: the controller
// closing an interval early (a rate that changed back) costs nothing.
func TestAccrueSplitsExactly(t *testing.T) {
	r := Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)
	whole := Accrue(scalingv1alpha1.SavingsTotals{}, r, t0, t0.Add(2*time.Hour))
	half := Accrue(Accrue(scalingv1alpha1.SavingsTotals{}, r, t0, t0.Add(time.Hour)), r, t0.Add(time.Hour), t0.Add(2*time.Hour))
	sameTotals(t, half, whole)
}

func TestExtrapolation(t *testing.T) {
	since := metav1.NewTime(t0)
	s := &scalingv1alpha1.SavingsStatus{
		SavingsTotals: totals("10", "5", "2"),
		Namespaces: []scalingv1alpha1.NamespaceSavings{
			{Namespace: "a", SavingsTotals: totals("10", "5", "2"), CurrentRate: StatusRate(Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3)), RateSince: &since},
			{Namespace: "b", SavingsTotals: totals("0", "0", "0")},
		},
	}
	now := t0.Add(2 * time.Hour)
	sameTotals(t, Namespace(s.Namespaces[0], now), totals("16", "6.5", "2.75"))
	sameTotals(t, Namespace(s.Namespaces[1], now), totals("0", "0", "0"))
	sameTotals(t, Total(s, now), totals("16", "6.5", "2.75"))
	sameTotals(t, Total(nil, now), scalingv1alpha1.SavingsTotals{})
}

func TestMoney(t *testing.T) {
	if Money(nil, totals("1", "1", "1"), Rate{}) != nil {
		t.Fatal("money without prices")
	}
	prices := &scalingv1alpha1.SavingsPrices{Currency: "EUR", CPUCoreHour: ptr.To(resource.MustParse("0.04")), MemoryGiBHour: ptr.To(resource.MustParse("0.005"))}
	rate := Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3) // 0.75 cores, 0.375 GiB
	m := Money(prices, totals("6", "1.5", "0.75"), rate)
	// 1.5 × 0.04 + 0.75 × 0.005 = 0.06375; per hour 0.75 × 0.04 + 0.375 × 0.005 = 0.031875.
	if m.Currency != "EUR" || m.Total.Cmp(resource.MustParse("0.06375")) != 0 || m.PerHour.Cmp(resource.MustParse("0.031875")) != 0 {
		t.Fatalf("money %s total %s per hour %s", m.Currency, &m.Total, &m.PerHour)
	}
	cpuOnly := &scalingv1alpha1.SavingsPrices{Currency: "USD", CPUCoreHour: ptr.To(resource.MustParse("2"))}
	if m := Money(cpuOnly, totals("6", "1.5", "0.75"), Rate{}); m.Total.Cmp(resource.MustParse("3")) != 0 || !m.PerHour.IsZero() {
		t.Fatalf("cpu only: total %s per hour %s", &m.Total, &m.PerHour)
	}
}
