package nsscaler

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/internal/savings"
	"github.com/runbook-dev/runbook/test/testenv"
)

// createRequestingDeployment creates a Deployment whose pods request cpu and
// memory, with an init container that requests less (it does not count).
func createRequestingDeployment(t *testing.T, ns, name string, replicas int32, cpu, memory string) {
	t.Helper()
	tpl := podTemplate(name)
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	tpl.Spec.Containers[0].Resources.Requests = req
	tpl.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.invalid/init:1", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: tpl,
		},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func expectSavings(g Gomega, got scalingv1alpha1.SavingsTotals, pods, cpu, mem string) {
	g.Expect(got.PodHours.Cmp(resource.MustParse(pods))).To(BeZero(), "pod-hours %s, want %s", &got.PodHours, pods)
	g.Expect(got.CPUCoreHours.Cmp(resource.MustParse(cpu))).To(BeZero(), "core-hours %s, want %s", &got.CPUCoreHours, cpu)
	g.Expect(got.MemoryGiBHours.Cmp(resource.MustParse(mem))).To(BeZero(), "GiB-hours %s, want %s", &got.MemoryGiBHours, mem)
}

// savedCounter reads one runbook_nsscaler_saved_*_total series of a
// manager (-1: absent).
func savedCounter(m *nsscontroller.Metrics, metric, scaler, namespace string) float64 {
	ch := make(chan prometheus.Metric)
	go func() { m.SavedCollector().Collect(ch); close(ch) }()
	v := -1.0
	for s := range ch {
		desc := s.Desc().String()
		if strings.Contains(desc, metric) && strings.Contains(labelsOf(s), scaler) && strings.Contains(labelsOf(s), namespace) {
			v = metricValue(s)
		}
	}
	return v
}

// TestSavingsParkRestartRestore parks 3 replicas requesting 250m CPU and
// 128Mi at T0, stops the manager one hour in and starts another, restores at
// T0+2h: exactly 6 pod-hours, 1.5 core-hours and 0.75 GiB-hours, counted
// once although two managers saw the park.
func TestSavingsParkRestartRestore(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T20:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	first := startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "savings")
	createRequestingDeployment(t, ns, "web", 3, "250m", "128Mi")
	// A CronJob is parked too but is not counted (its pods come and go).
	createCronJob(t, ns, "nightly", nil)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: scalingv1alpha1.KindDeployment}, {Kind: scalingv1alpha1.KindCronJob}}})

	g.Eventually(func(g Gomega) {
		s := getScaler(g, name).Status.Savings
		g.Expect(s).NotTo(BeNil())
		g.Expect(s.Namespaces).To(HaveLen(1))
		n := s.Namespaces[0]
		g.Expect(n.Namespace).To(Equal(ns))
		g.Expect(n.CurrentRate.Pods).To(Equal(int64(3)))
		g.Expect(n.CurrentRate.CPU.Cmp(resource.MustParse("750m"))).To(BeZero())
		g.Expect(n.CurrentRate.Memory.Cmp(resource.MustParse("384Mi"))).To(BeZero())
		g.Expect(n.RateSince).NotTo(BeNil())
		g.Expect(n.RateSince.Time.Equal(t0)).To(BeTrue(), "rate since %s", n.RateSince)
		g.Expect(s.Since.Time.Equal(t0)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Expect(getScaler(g, name).Status.ParkedWorkloads).To(Equal(int32(2)))

	// One hour in: the counters have grown with the clock, not the status.
	clk.SetTime(t0.Add(time.Hour))
	g.Expect(savedCounter(first.metrics, "cpu_core_hours", name, ns)).To(Equal(0.75))
	before := getScaler(g, name)
	first.stop(t)

	requests := &requestLog{}
	second := startManager(t, managerOptions{clock: clk, requests: requests})
	// The new manager has reconciled once its counters exist (they are set
	// after the status write); they continue from the status, and the status
	// was not written: an hour of parking changes nothing in it.
	g.Eventually(func() float64 { return savedCounter(second.metrics, "pod_hours", name, ns) }, timeout, poll).Should(Equal(3.0))
	g.Expect(requests.writes("/nsscalers/" + name)).To(BeEmpty())
	after := getScaler(g, name)
	g.Expect(after.Status.Savings).To(Equal(before.Status.Savings))
	expectSavings(g, after.Status.Savings.SavingsTotals, "0", "0", "0")

	clk.SetTime(t0.Add(2 * time.Hour))
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name).Status.Savings
		g.Expect(s.CurrentRate.Pods).To(BeZero())
		g.Expect(s.Namespaces).To(HaveLen(1))
		g.Expect(s.Namespaces[0].RateSince).To(BeNil())
		expectSavings(g, s.SavingsTotals, "6", "1.5", "0.75")
		expectSavings(g, s.Namespaces[0].SavingsTotals, "6", "1.5", "0.75")
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	// Positive control: the restore's status write is in the log.
	g.Expect(requests.writes("/nsscalers/"+name, "/status")).NotTo(BeEmpty())

	// Awake, time adds nothing.
	clk.SetTime(t0.Add(5 * time.Hour))
	g.Expect(savedCounter(second.metrics, "cpu_core_hours", name, ns)).To(Equal(1.5))
	expectSavings(g, savings.Total(getScaler(g, name).Status.Savings, clk.Now()), "6", "1.5", "0.75")
	deleteScalerAndWait(t, name) // while the second manager runs
}

// TestSavingsPricesAndAHostileRequest: prices turn the totals into money;
// parkedReplicas: 1 counts only the replicas above it; a Deployment whose
// template requests an absurd amount saturates its own namespace's figures
// and leaves the other namespace's exact.
func TestSavingsPricesAndAHostileRequest(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T20:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p := prefix("price")
	good, bad := p+"good", p+"bad"
	name := testenv.RandomName("price")
	for _, ns := range []string{good, bad} {
		createNamespace(t, ns, nil)
	}
	createRequestingDeployment(t, good, "web", 2, "1", "1Gi")
	createRequestingDeployment(t, bad, "hog", 1000, "9e15", "1Ei")
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, ParkedReplicas: 1, Prices: &scalingv1alpha1.SavingsPrices{
		Currency: "EUR", CPUCoreHour: ptr.To(resource.MustParse("0.04")), MemoryGiBHour: ptr.To(resource.MustParse("0.005"))}})
	g.Eventually(func(g Gomega) {
		g.Expect(getScaler(g, name).Status.Savings).NotTo(BeNil())
		g.Expect(getScaler(g, name).Status.Savings.Namespaces).To(HaveLen(2))
	}, timeout, poll).Should(Succeed())

	clk.SetTime(t0.Add(3 * time.Hour))
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{good} })
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name).Status.Savings
		g.Expect(s.Namespaces).To(HaveLen(2))
		byName := map[string]scalingv1alpha1.NamespaceSavings{}
		for _, n := range s.Namespaces {
			byName[n.Namespace] = n
		}
		// 2 replicas parked to 1: one pod of 1 core and 1Gi for 3h.
		expectSavings(g, byName[good].SavingsTotals, "3", "3", "3")
		g.Expect(byName[good].RateSince).To(BeNil())
		hog := byName[bad]
		g.Expect(hog.CurrentRate.Pods).To(Equal(int64(999)))
		g.Expect(hog.CurrentRate.CPU.MilliValue()).To(BeNumerically("==", int64(1<<63-1)), "saturated, not wrapped")
		// 3 core-hours × 0.04 + 3 GiB-hours × 0.005 = 0.135; the hog's
		// open interval is in perHour only.
		g.Expect(s.Money).NotTo(BeNil())
		g.Expect(s.Money.Currency).To(Equal("EUR"))
		g.Expect(s.Money.Total.Cmp(resource.MustParse("0.135"))).To(BeZero(), "total %s", &s.Money.Total)
	}, timeout, poll).Should(Succeed())
}

// labelsOf renders a series' label values.
func labelsOf(m prometheus.Metric) string {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, l := range d.GetLabel() {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ";")
	}
	return b.String()
}
