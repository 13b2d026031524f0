package nsscaler

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/test/testenv"
)

var allBuiltins = []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}, {Kind: "StatefulSet"}, {Kind: "CronJob"}}

// populate creates the same workloads in a namespace: Deployments web (3) and
// api (replicas unset: the apiserver defaults 1), StatefulSet db (2), CronJobs
// nightly (suspend unset) and paused (suspend true).
func populate(t *testing.T, ns string) {
	createNamespace(t, ns, nil)
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createDeployment(t, ns, "api", nil)
	createStatefulSet(t, ns, "db", 2)
	createCronJob(t, ns, "nightly", nil)
	createCronJob(t, ns, "paused", ptr.To(true))
}

func expectParked(g Gomega, by, ns string) {
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(by, 3)}), "web in %s", ns)
	g.Expect(deploymentState(g, ns, "api")).To(Equal(state{Replicas: 0, Annotation: parkedBy(by, 1)}), "api in %s", ns)
	g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 0, Annotation: parkedBy(by, 2)}), "db in %s", ns)
	g.Expect(cronJobState(g, ns, "nightly")).To(Equal(state{Suspend: true, Annotation: nsscontroller.SuspendOriginal(false, by).Encode()}), "nightly in %s", ns)
	g.Expect(cronJobState(g, ns, "paused")).To(Equal(state{Suspend: true, Annotation: nsscontroller.SuspendOriginal(true, by).Encode()}), "paused in %s", ns)
}

func expectOriginal(g Gomega, ns string) {
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}), "web in %s", ns)
	g.Expect(deploymentState(g, ns, "api")).To(Equal(state{Replicas: 1}), "api in %s", ns)
	g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 2}), "db in %s", ns)
	g.Expect(cronJobState(g, ns, "nightly")).To(Equal(state{Suspend: false}), "nightly in %s", ns)
	g.Expect(cronJobState(g, ns, "paused")).To(Equal(state{Suspend: true}), "paused in %s", ns)
}

func conditionReason(s scalingv1alpha1.NSScaler, t string) (metav1.ConditionStatus, string) {
	c := meta.FindStatusCondition(s.Status.Conditions, t)
	if c == nil {
		return "", ""
	}
	return c.Status, c.Reason
}

// expectSettled waits until the NSScaler reports the spec applied: parked
// and active namespaces, that many workloads parked and controlled ones
// left alone, no pod remaining, Ready, Parked (AllPodsGone), not Degraded,
// and its finalizer held.
func expectSettled(g Gomega, name string, parked, active []string, workloads, controlled int32) {
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ParkedNamespaces).To(Equal(parked))
		g.Expect(s.Status.ActiveNamespaces).To(Equal(active))
		g.Expect(s.Status.ParkedNamespaceCount).To(Equal(int32(len(parked))))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(workloads))
		g.Expect(s.Status.ControlledWorkloads).To(Equal(controlled))
		g.Expect(s.Status.PodsRemaining).To(Equal(int32(0)))
		g.Expect(s.Status.Done).To(BeTrue())
		st, reason := conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue), reason)
		st, reason = conditionReason(s, scalingv1alpha1.ConditionParked)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonAllPodsGone}))
		st, _ = conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect(st).To(Equal(metav1.ConditionFalse))
		g.Expect(s.Finalizers).To(ContainElement(nsscontroller.Finalizer))
	}, timeout, poll).Should(Succeed())
}

// expectParkMetrics checks the NSScaler's gauges after a park of workloads
// in namespaces, and that each workload took one write.
func expectParkMetrics(g Gomega, mgr *runningManager, name string, namespaces, workloads float64) {
	g.Expect(metricValue(mgr.metrics.ParkedNamespaces.WithLabelValues(name))).To(Equal(namespaces))
	g.Expect(metricValue(mgr.metrics.ParkedWorkloads.WithLabelValues(name))).To(Equal(workloads))
	g.Expect(seriesCount(mgr.metrics.ParkDuration)).To(Equal(1), "one park-duration series")
	g.Expect(metricValue(mgr.metrics.Writes.WithLabelValues(name, "park", "ok"))).To(Equal(workloads), "one write per parked workload")
}

// expectNewWorkloadsParkedAtOnce: a new workload in the parked namespace
// parked and a new namespace newNS matching the prefix are parked at once
// (no resync).
func expectNewWorkloadsParkedAtOnce(t *testing.T, g Gomega, name, parked, newNS string) {
	createDeployment(t, parked, "late", ptr.To[int32](4))
	createNamespace(t, newNS, nil)
	createDeployment(t, newNS, "web", ptr.To[int32](2))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, parked, "late")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 4)}))
		g.Expect(deploymentState(g, newNS, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())
}

func TestParkWhitelistFlipAndDeletionRestore(t *testing.T) {
	mgr := startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	p := prefix("pa")
	a, b, c, d := p+"a", p+"b", p+"c", p+"d"
	name := testenv.RandomName("park-basic")
	for _, ns := range []string{a, b, c} {
		populate(t, ns)
	}
	// Controlled by another object: left alone and counted.
	owned := createDeployment(t, a, "owned", ptr.To[int32](2))
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("0f6a1d2e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}}
	g.Expect(k8s.Update(ctx, owned)).To(Succeed())

	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Whitelist: []string{b}, Kinds: allBuiltins})

	g.Eventually(func(g Gomega) {
		expectParked(g, name, a)
		expectParked(g, name, c)
	}, timeout, poll).Should(Succeed())
	expectOriginal(g, b)
	g.Expect(deploymentState(g, a, "owned")).To(Equal(state{Replicas: 2}))
	expectSettled(g, name, []string{a, c}, []string{b}, 10, 1)
	expectParkMetrics(g, mgr, name, 2, 10)
	expectNamespaceEvents(g, name, scalingv1alpha1.EventNamespaceParked, a, c)

	expectNewWorkloadsParkedAtOnce(t, g, name, c, d)

	// Whitelist flip: a comes back exactly, b is parked.
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{a} })
	g.Eventually(func(g Gomega) {
		expectOriginal(g, a)
		expectParked(g, name, b)
		expectParked(g, name, c)
	}, timeout, poll).Should(Succeed())

	// Kinds shrink: CronJobs are restored, the rest stays parked.
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Kinds = s.Kinds[:2] })
	g.Eventually(func(g Gomega) {
		g.Expect(cronJobState(g, c, "nightly")).To(Equal(state{Suspend: false}))
		g.Expect(cronJobState(g, c, "paused")).To(Equal(state{Suspend: true}))
		g.Expect(deploymentState(g, c, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())

	expectNamespaceEvents(g, name, scalingv1alpha1.EventNamespaceRestored, a)

	// Deletion restores everything (finalizer) and drops the metric series.
	deleteScalerAndWait(t, name)
	g.Expect(seriesCount(mgr.metrics.ParkedNamespaces)).To(BeZero())
	for _, ns := range []string{a, b, c} {
		expectOriginal(g, ns)
	}
	g.Expect(deploymentState(g, c, "late")).To(Equal(state{Replicas: 4}))
	g.Expect(deploymentState(g, d, "web")).To(Equal(state{Replicas: 2}))
}

func TestManualScaleUpIsReparkedKeepingTheOriginal(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "manual")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())

	// Someone scales the parked Deployment up by hand: parked again, the
	// recorded original is not replaced by 5 (nor by 0).
	scaleDeployment(t, ns, "web", 5)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())

	// Editing the annotation is how a user changes what comes back.
	patchAnnotation(t, ns, "web", parkedBy(name, 4))
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 4}))
	}, timeout, poll).Should(Succeed())
}

func TestHPATargetIsRestoredExactly(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	p, ns, name := oneNamespace(t, "hpa")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 6,
		},
	}
	g.Expect(k8s.Create(ctx, hpa)).To(Succeed())
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
	var after autoscalingv2.HorizontalPodAutoscaler
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(hpa), &after)).To(Succeed())
	g.Expect(after.Spec).To(Equal(hpa.Spec), "the HPA itself is never touched")
}

// createCustomWorkloads creates, in ns, Widgets "three" (3 replicas) and
// "unset" (no replica count), a Memcached "cache" (2) and the Deployment
// behind it, which it controls: not parked directly (its owner is).
func createCustomWorkloads(t *testing.T, g Gomega, ns string) {
	createWidget(t, ns, "three", ptr.To[int64](3))
	createWidget(t, ns, "unset", nil)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(context.Background(), mc)).To(Succeed())
	behind := createDeployment(t, ns, "cache", ptr.To[int32](2))
	behind.OwnerReferences = []metav1.OwnerReference{{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: mc.UID, Controller: ptr.To(true)}}
	g.Expect(k8s.Update(context.Background(), behind)).To(Succeed())
}

func TestScaleSubresourceCustomResources(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	p, ns, name := oneNamespace(t, "custom")
	createCustomWorkloads(t, g, ns)

	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: "Deployment"},
		{Group: "test.runbook.dev", Kind: "Widget"},
		{Group: "cache.runbook.dev", Kind: "Memcached"},
	}})
	g.Eventually(func(g Gomega) {
		w, found := widgetState(g, ns, "three")
		g.Expect(found).To(BeTrue())
		g.Expect(w).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		w, found = widgetState(g, ns, "unset")
		g.Expect(found).To(BeFalse(), "an unset replica count is left unset")
		g.Expect(w).To(Equal(state{}), "a count of 0 is at parkedReplicas already: nothing written")
		g.Expect(memcachedState(g, ns, "cache")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(2)))
		g.Expect(s.Status.AtOrBelowParkedReplicas).To(Equal(int32(1)))
		g.Expect(s.Status.ControlledWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.ParkedKinds).To(Equal([]scalingv1alpha1.WorkloadKind{
			{Group: "cache.runbook.dev", Kind: "Memcached"}, {Group: "test.runbook.dev", Kind: "Widget"},
		}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "cache")).To(Equal(state{Replicas: 2}))

	// Scaling a parked custom resource up by hand (through its scale
	// subresource) is undone too.
	u := widgetObject(ns, "three")
	g.Expect(k8s.SubResource("scale").Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":6}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		w, _ := widgetState(g, ns, "three")
		g.Expect(w).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())

	// Widget leaves the kinds: restored although it is no longer in the spec.
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) {
		s.Kinds = []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}, {Group: "cache.runbook.dev", Kind: "Memcached"}}
	})
	g.Eventually(func(g Gomega) {
		w, _ := widgetState(g, ns, "three")
		g.Expect(w).To(Equal(state{Replicas: 3}))
		w, found := widgetState(g, ns, "unset")
		g.Expect(found).To(BeFalse())
		g.Expect(w).To(Equal(state{}))
		g.Expect(getScaler(g, name).Status.ParkedKinds).To(Equal([]scalingv1alpha1.WorkloadKind{{Group: "cache.runbook.dev", Kind: "Memcached"}}))
	}, timeout, poll).Should(Succeed())

	deleteScalerAndWait(t, name)
	g.Expect(memcachedState(g, ns, "cache")).To(Equal(state{Replicas: 2}))
}

func TestUnavailableKindDegradesButOthersPark(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "unknown-kind")
	createDeployment(t, ns, "web", ptr.To[int32](2))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: "Deployment"}, {Group: "nope.runbook.dev", Kind: "Gadget"},
	}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		st, reason := conditionReason(getScaler(g, name), scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonKindUnavailable}))
	}, timeout, poll).Should(Succeed())
}

func TestTwoScalersOnOneNamespace(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p := prefix("cf")
	a, b := p+"a", p+"b"
	// The older NSScaler wins a contested namespace (creation time, then
	// name: these sort in creation order too).
	first, second := testenv.RandomName("conflict-first"), testenv.RandomName("conflict-second")
	createNamespace(t, a, nil)
	createNamespace(t, b, nil)
	createDeployment(t, a, "web", ptr.To[int32](3))
	createDeployment(t, b, "web", ptr.To[int32](2))
	createScaler(t, first, scalingv1alpha1.NSScalerSpec{NamespacePrefix: a})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web").Annotation).To(Equal(parkedBy(first, 3)))
	}, timeout, poll).Should(Succeed())
	createScaler(t, second, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Whitelist: []string{a}})

	g.Eventually(func(g Gomega) {
		for _, name := range []string{first, second} {
			s := getScaler(g, name)
			g.Expect(s.Status.Conflicts).To(Equal([]scalingv1alpha1.NamespaceConflict{{Namespace: a, Owner: first}}), name)
			st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
			g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonNamespaceConflict}), name)
		}
		g.Expect(getScaler(g, second).Status.ParkedNamespaces).To(Equal([]string{b}))
		g.Expect(getScaler(g, second).Status.ActiveNamespaces).To(BeEmpty())
		g.Expect(deploymentState(g, b, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(second, 2)}))
	}, timeout, poll).Should(Succeed())
	// The newer one's whitelist does not restore the older one's namespace.
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(first, 3)}))
	}, "2s", poll).Should(Succeed())

	// The older one goes: the namespace passes to the newer one, which
	// whitelists it, so it runs again with its original count.
	deleteScalerAndWait(t, first)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, a, "web")).To(Equal(state{Replicas: 3}))
		s := getScaler(g, second)
		g.Expect(s.Status.Conflicts).To(BeEmpty())
		g.Expect(s.Status.ActiveNamespaces).To(Equal([]string{a}))
	}, timeout, poll).Should(Succeed())
}

// TestProtectedNamespacesAreNeverParked: the operator's namespace (a
// random one, created here) is selected but never parked; the system
// namespaces, selected by a prefix, are reported as protected and nothing
// in them is touched (the test writes nothing there either).
func TestProtectedNamespacesAreNeverParked(t *testing.T) {
	operatorNamespace := testenv.RandomName("runbook-system")
	startManager(t, managerOptions{operatorNamespace: operatorNamespace})
	g := NewWithT(t)
	ctx := context.Background()
	label := map[string]string{"runbook.dev/park": testenv.RandomName("yes")}
	apps, name := testenv.RandomName("pr-apps"), testenv.RandomName("protected")
	createNamespace(t, operatorNamespace, label)
	createNamespace(t, apps, label)
	for _, ns := range []string{operatorNamespace, apps} {
		createDeployment(t, ns, "web", ptr.To[int32](2))
	}
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: label}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, apps, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ParkedNamespaces).To(Equal([]string{apps}))
		c := meta.FindStatusCondition(s.Status.Conditions, scalingv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("protected namespaces never parked: " + operatorNamespace))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, operatorNamespace, "web")).To(Equal(state{Replicas: 2}))

	system := testenv.RandomName("protected-system")
	createScaler(t, system, scalingv1alpha1.NSScalerSpec{NamespacePrefix: "kube-"})
	g.Eventually(func(g Gomega) {
		s := getScaler(g, system)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ParkedNamespaces).To(BeEmpty())
		g.Expect(s.Status.ActiveNamespaces).To(BeEmpty())
		c := meta.FindStatusCondition(s.Status.Conditions, scalingv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("protected namespaces never parked: kube-node-lease, kube-public, kube-system"))
	}, timeout, poll).Should(Succeed())

	// The namespace stops matching (label removed): restored at once.
	var ns corev1.Namespace
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: apps}, &ns)).To(Succeed())
	delete(ns.Labels, "runbook.dev/park")
	g.Expect(k8s.Update(ctx, &ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, apps, "web")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
}

func TestSuspendStopsActing(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "suspend")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web").Replicas).To(BeZero())
	}, timeout, poll).Should(Succeed())
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Suspend = true; s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		_, reason := conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect(reason).To(Equal(scalingv1alpha1.ReasonSuspended))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, "2s", poll).Should(Succeed())
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Suspend = false })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
}

func TestDeletionPolicyKeepLeavesWorkloadsParkedForALaterScaler(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "keep")
	later := testenv.RandomName("keep-later")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, DeletionPolicy: scalingv1alpha1.DeletionPolicyKeep})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
	}, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, name)
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))

	// A later NSScaler that whitelists the namespace restores the original
	// the first one recorded.
	createScaler(t, later, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Whitelist: []string{ns}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
}

func conditionMessage(s scalingv1alpha1.NSScaler, t string) string {
	c := meta.FindStatusCondition(s.Status.Conditions, t)
	if c == nil {
		return ""
	}
	return c.Message
}
