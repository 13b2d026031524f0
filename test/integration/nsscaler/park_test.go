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

func TestParkWhitelistFlipAndDeletionRestore(t *testing.T) {
	mgr := startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"pa-a", "pa-b", "pa-c"} {
		populate(t, ns)
	}
	// Controlled by another object: left alone and counted.
	owned := createDeployment(t, "pa-a", "owned", ptr.To[int32](2))
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("0f6a1d2e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}}
	g.Expect(k8s.Update(ctx, owned)).To(Succeed())

	createScaler(t, "park-basic", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "pa-", Whitelist: []string{"pa-b"}, Kinds: allBuiltins})

	g.Eventually(func(g Gomega) {
		expectParked(g, "park-basic", "pa-a")
		expectParked(g, "park-basic", "pa-c")
	}, timeout, poll).Should(Succeed())
	expectOriginal(g, "pa-b")
	g.Expect(deploymentState(g, "pa-a", "owned")).To(Equal(state{Replicas: 2}))
	g.Eventually(func(g Gomega) {
		s := getScaler(g, "park-basic")
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ParkedNamespaces).To(Equal([]string{"pa-a", "pa-c"}))
		g.Expect(s.Status.ActiveNamespaces).To(Equal([]string{"pa-b"}))
		g.Expect(s.Status.ParkedNamespaceCount).To(Equal(int32(2)))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(10)))
		g.Expect(s.Status.ControlledWorkloads).To(Equal(int32(1)))
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
	g.Expect(metricValue(mgr.metrics.ParkedNamespaces.WithLabelValues("park-basic"))).To(Equal(2.0))
	g.Expect(metricValue(mgr.metrics.ParkedWorkloads.WithLabelValues("park-basic"))).To(Equal(10.0))
	g.Expect(seriesCount(mgr.metrics.ParkDuration)).To(Equal(1), "one park-duration series")
	g.Expect(metricValue(mgr.metrics.Writes.WithLabelValues("park-basic", "park", "ok"))).To(Equal(10.0), "one write per parked workload")

	// Reacts to new workloads and new namespaces at once (no resync).
	createDeployment(t, "pa-c", "late", ptr.To[int32](4))
	createNamespace(t, "pa-d", nil)
	createDeployment(t, "pa-d", "web", ptr.To[int32](2))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "pa-c", "late")).To(Equal(state{Replicas: 0, Annotation: parkedBy("park-basic", 4)}))
		g.Expect(deploymentState(g, "pa-d", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("park-basic", 2)}))
	}, timeout, poll).Should(Succeed())

	// Whitelist flip: a comes back exactly, b is parked.
	updateScaler(t, "park-basic", func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{"pa-a"} })
	g.Eventually(func(g Gomega) {
		expectOriginal(g, "pa-a")
		expectParked(g, "park-basic", "pa-b")
		expectParked(g, "park-basic", "pa-c")
	}, timeout, poll).Should(Succeed())

	// Kinds shrink: CronJobs are restored, the rest stays parked.
	updateScaler(t, "park-basic", func(s *scalingv1alpha1.NSScalerSpec) { s.Kinds = s.Kinds[:2] })
	g.Eventually(func(g Gomega) {
		g.Expect(cronJobState(g, "pa-c", "nightly")).To(Equal(state{Suspend: false}))
		g.Expect(cronJobState(g, "pa-c", "paused")).To(Equal(state{Suspend: true}))
		g.Expect(deploymentState(g, "pa-c", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("park-basic", 3)}))
	}, timeout, poll).Should(Succeed())

	// Deletion restores everything (finalizer) and drops the metric series.
	deleteScalerAndWait(t, "park-basic")
	g.Expect(seriesCount(mgr.metrics.ParkedNamespaces)).To(BeZero())
	for _, ns := range []string{"pa-a", "pa-b", "pa-c"} {
		expectOriginal(g, ns)
	}
	g.Expect(deploymentState(g, "pa-c", "late")).To(Equal(state{Replicas: 4}))
	g.Expect(deploymentState(g, "pa-d", "web")).To(Equal(state{Replicas: 2}))
}

func TestManualScaleUpIsReparkedKeepingTheOriginal(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "mu-a", nil)
	createDeployment(t, "mu-a", "web", ptr.To[int32](3))
	createScaler(t, "manual", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "mu-"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "mu-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("manual", 3)}))
	}, timeout, poll).Should(Succeed())

	// Someone scales the parked Deployment up by hand: parked again, the
	// recorded original is not replaced by 5 (nor by 0).
	scaleDeployment(t, "mu-a", "web", 5)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "mu-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("manual", 3)}))
	}, timeout, poll).Should(Succeed())

	// Editing the annotation is how a user changes what comes back.
	patchAnnotation(t, "mu-a", "web", parkedBy("manual", 4))
	updateScaler(t, "manual", func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{"mu-a"} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "mu-a", "web")).To(Equal(state{Replicas: 4}))
	}, timeout, poll).Should(Succeed())
}

func TestHPATargetIsRestoredExactly(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "hpa-a", nil)
	createDeployment(t, "hpa-a", "web", ptr.To[int32](3))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hpa-a", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 6,
		},
	}
	g.Expect(k8s.Create(ctx, hpa)).To(Succeed())
	createScaler(t, "hpa", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "hpa-"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "hpa-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("hpa", 3)}))
	}, timeout, poll).Should(Succeed())
	updateScaler(t, "hpa", func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{"hpa-a"} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "hpa-a", "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
	var after autoscalingv2.HorizontalPodAutoscaler
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(hpa), &after)).To(Succeed())
	g.Expect(after.Spec).To(Equal(hpa.Spec), "the HPA itself is never touched")
}

func TestScaleSubresourceCustomResources(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	createNamespace(t, "cr-a", nil)
	createWidget(t, "cr-a", "three", ptr.To[int64](3))
	createWidget(t, "cr-a", "unset", nil)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "cr-a", Name: "cache"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
	g.Expect(k8s.Create(ctx, mc)).To(Succeed())
	// The Deployment behind the Memcached is controlled by it: not parked
	// directly (its owner is).
	behind := createDeployment(t, "cr-a", "cache", ptr.To[int32](2))
	behind.OwnerReferences = []metav1.OwnerReference{{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached", Name: "cache", UID: mc.UID, Controller: ptr.To(true)}}
	g.Expect(k8s.Update(ctx, behind)).To(Succeed())

	createScaler(t, "custom", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "cr-", Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: "Deployment"},
		{Group: "test.runbook.dev", Kind: "Widget"},
		{Group: "cache.runbook.dev", Kind: "Memcached"},
	}})
	g.Eventually(func(g Gomega) {
		w, found := widgetState(g, "cr-a", "three")
		g.Expect(found).To(BeTrue())
		g.Expect(w).To(Equal(state{Replicas: 0, Annotation: parkedBy("custom", 3)}))
		w, found = widgetState(g, "cr-a", "unset")
		g.Expect(found).To(BeFalse(), "an unset replica count is left unset")
		g.Expect(w).To(Equal(state{Replicas: 0, Annotation: parkedBy("custom", 0)}))
		g.Expect(memcachedState(g, "cr-a", "cache")).To(Equal(state{Replicas: 0, Annotation: parkedBy("custom", 2)}))
		s := getScaler(g, "custom")
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(3)))
		g.Expect(s.Status.ControlledWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.ParkedKinds).To(Equal([]scalingv1alpha1.WorkloadKind{
			{Group: "cache.runbook.dev", Kind: "Memcached"}, {Group: "test.runbook.dev", Kind: "Widget"},
		}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, "cr-a", "cache")).To(Equal(state{Replicas: 2}))

	// Scaling a parked custom resource up by hand (through its scale
	// subresource) is undone too.
	u := widgetObject("cr-a", "three")
	g.Expect(k8s.SubResource("scale").Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":6}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		w, _ := widgetState(g, "cr-a", "three")
		g.Expect(w).To(Equal(state{Replicas: 0, Annotation: parkedBy("custom", 3)}))
	}, timeout, poll).Should(Succeed())

	// Widget leaves the kinds: restored although it is no longer in the spec.
	updateScaler(t, "custom", func(s *scalingv1alpha1.NSScalerSpec) {
		s.Kinds = []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}, {Group: "cache.runbook.dev", Kind: "Memcached"}}
	})
	g.Eventually(func(g Gomega) {
		w, _ := widgetState(g, "cr-a", "three")
		g.Expect(w).To(Equal(state{Replicas: 3}))
		w, found := widgetState(g, "cr-a", "unset")
		g.Expect(found).To(BeFalse())
		g.Expect(w).To(Equal(state{}))
		g.Expect(getScaler(g, "custom").Status.ParkedKinds).To(Equal([]scalingv1alpha1.WorkloadKind{{Group: "cache.runbook.dev", Kind: "Memcached"}}))
	}, timeout, poll).Should(Succeed())

	deleteScalerAndWait(t, "custom")
	g.Expect(memcachedState(g, "cr-a", "cache")).To(Equal(state{Replicas: 2}))
}

func TestUnavailableKindDegradesButOthersPark(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "uk-a", nil)
	createDeployment(t, "uk-a", "web", ptr.To[int32](2))
	createScaler(t, "unknown-kind", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "uk-", Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: "Deployment"}, {Group: "nope.runbook.dev", Kind: "Gadget"},
	}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "uk-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("unknown-kind", 2)}))
		st, reason := conditionReason(getScaler(g, "unknown-kind"), scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonKindUnavailable}))
	}, timeout, poll).Should(Succeed())
}

func TestTwoScalersOnOneNamespace(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "cf-a", nil)
	createNamespace(t, "cf-b", nil)
	createDeployment(t, "cf-a", "web", ptr.To[int32](3))
	createDeployment(t, "cf-b", "web", ptr.To[int32](2))
	createScaler(t, "conflict-first", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "cf-a"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "cf-a", "web").Annotation).To(Equal(parkedBy("conflict-first", 3)))
	}, timeout, poll).Should(Succeed())
	createScaler(t, "conflict-second", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "cf-", Whitelist: []string{"cf-a"}})

	g.Eventually(func(g Gomega) {
		for _, name := range []string{"conflict-first", "conflict-second"} {
			s := getScaler(g, name)
			g.Expect(s.Status.Conflicts).To(Equal([]scalingv1alpha1.NamespaceConflict{{Namespace: "cf-a", Owner: "conflict-first"}}), name)
			st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
			g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonNamespaceConflict}), name)
		}
		g.Expect(getScaler(g, "conflict-second").Status.ParkedNamespaces).To(Equal([]string{"cf-b"}))
		g.Expect(getScaler(g, "conflict-second").Status.ActiveNamespaces).To(BeEmpty())
		g.Expect(deploymentState(g, "cf-b", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("conflict-second", 2)}))
	}, timeout, poll).Should(Succeed())
	// The newer one's whitelist does not restore the older one's namespace.
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, "cf-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("conflict-first", 3)}))
	}, "2s", poll).Should(Succeed())

	// The older one goes: the namespace passes to the newer one, which
	// whitelists it, so it runs again with its original count.
	deleteScalerAndWait(t, "conflict-first")
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "cf-a", "web")).To(Equal(state{Replicas: 3}))
		s := getScaler(g, "conflict-second")
		g.Expect(s.Status.Conflicts).To(BeEmpty())
		g.Expect(s.Status.ActiveNamespaces).To(Equal([]string{"cf-a"}))
	}, timeout, poll).Should(Succeed())
}

func TestProtectedNamespacesAreNeverParked(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	label := map[string]string{"runbook.dev/park": "yes"}
	createNamespace(t, operatorNamespace, label)
	createNamespace(t, "pr-apps", label)
	var ks corev1.Namespace
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ks)).To(Succeed())
	ks.Labels["runbook.dev/park"] = "yes"
	g.Expect(k8s.Update(ctx, &ks)).To(Succeed())
	t.Cleanup(func() {
		var ks corev1.Namespace
		if err := k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ks); err == nil {
			delete(ks.Labels, "runbook.dev/park")
			_ = k8s.Update(ctx, &ks)
		}
	})
	for _, ns := range []string{operatorNamespace, "kube-system", "pr-apps"} {
		createDeployment(t, ns, "web", ptr.To[int32](2))
	}
	createScaler(t, "protected", scalingv1alpha1.NSScalerSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: label}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "pr-apps", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("protected", 2)}))
		s := getScaler(g, "protected")
		g.Expect(s.Status.ParkedNamespaces).To(Equal([]string{"pr-apps"}))
		c := meta.FindStatusCondition(s.Status.Conditions, scalingv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("kube-system"))
		g.Expect(c.Message).To(ContainSubstring(operatorNamespace))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, operatorNamespace, "web")).To(Equal(state{Replicas: 2}))
	g.Expect(deploymentState(g, "kube-system", "web")).To(Equal(state{Replicas: 2}))

	// The namespace stops matching (label removed): restored at once.
	var apps corev1.Namespace
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "pr-apps"}, &apps)).To(Succeed())
	delete(apps.Labels, "runbook.dev/park")
	g.Expect(k8s.Update(ctx, &apps)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "pr-apps", "web")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
}

func TestSuspendStopsActing(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "su-a", nil)
	createDeployment(t, "su-a", "web", ptr.To[int32](3))
	createScaler(t, "suspend", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "su-"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "su-a", "web").Replicas).To(BeZero())
	}, timeout, poll).Should(Succeed())
	updateScaler(t, "suspend", func(s *scalingv1alpha1.NSScalerSpec) { s.Suspend = true; s.Whitelist = []string{"su-a"} })
	g.Eventually(func(g Gomega) {
		s := getScaler(g, "suspend")
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		_, reason := conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect(reason).To(Equal(scalingv1alpha1.ReasonSuspended))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(deploymentState(g, "su-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("suspend", 3)}))
	}, "2s", poll).Should(Succeed())
	updateScaler(t, "suspend", func(s *scalingv1alpha1.NSScalerSpec) { s.Suspend = false })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "su-a", "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
}

func TestDeletionPolicyKeepLeavesWorkloadsParkedForALaterScaler(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "kp-a", nil)
	createDeployment(t, "kp-a", "web", ptr.To[int32](3))
	createScaler(t, "keep", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "kp-", DeletionPolicy: scalingv1alpha1.DeletionPolicyKeep})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "kp-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("keep", 3)}))
	}, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, "keep")
	g.Expect(deploymentState(g, "kp-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("keep", 3)}))

	// A later NSScaler that whitelists the namespace restores the original
	// the first one recorded.
	createScaler(t, "keep-later", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "kp-", Whitelist: []string{"kp-a"}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "kp-a", "web")).To(Equal(state{Replicas: 3}))
	}, timeout, poll).Should(Succeed())
}
