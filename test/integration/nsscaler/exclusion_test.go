package nsscaler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/test/testenv"
)

// patchMetadata merge-patches a Deployment's annotations or labels as its
// team would (field manager "team"); nil values remove.
func patchMetadata(t *testing.T, ns, name, field string, values map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{field: values}})
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, body), client.FieldOwner("team")); err != nil {
		t.Fatal(err)
	}
}

// TestExclusions: a workload annotated exclude: "true" keeps running, one
// with exclude-until runs until then (fake clock) and is parked at that
// moment, one matching excludeSelector runs, a parked one that comes to
// match is restored, a malformed annotation is reported and ignored.
func TestExclusions(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	startManager(t, managerOptions{clock: clk})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "exclude")
	for _, d := range []string{"always", "until", "labelled", "later", "malformed", "plain"} {
		createDeployment(t, ns, d, ptr.To[int32](2))
	}
	until := t0.Add(30 * time.Minute)
	patchMetadata(t, ns, "always", "annotations", map[string]any{nsscontroller.AnnotationExclude: "true"})
	patchMetadata(t, ns, "until", "annotations", map[string]any{nsscontroller.AnnotationExcludeUntil: until.Format(time.RFC3339)})
	patchMetadata(t, ns, "labelled", "labels", map[string]any{"keep": "running"})
	patchMetadata(t, ns, "malformed", "annotations", map[string]any{nsscontroller.AnnotationExclude: "please"})
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p,
		ExcludeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"keep": "running"}}})

	g.Eventually(func(g Gomega) {
		for _, d := range []string{"plain", "later", "malformed"} {
			g.Expect(deploymentState(g, ns, d)).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}), d)
		}
		for _, d := range []string{"always", "until", "labelled"} {
			g.Expect(deploymentState(g, ns, d)).To(Equal(state{Replicas: 2}), d)
		}
		s := getScaler(g, name)
		g.Expect(s.Status.ExcludedWorkloads).To(Equal(int32(3)))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(3)))
		st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonInvalidAnnotation}))
	}, timeout, poll).Should(Succeed())

	// A parked workload that comes to match the selector is restored.
	patchMetadata(t, ns, "later", "labels", map[string]any{"keep": "running"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "later")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())

	// exclude-until passes: parked at that moment.
	clk.SetTime(until)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "until")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		g.Expect(getScaler(g, name).Status.ExcludedWorkloads).To(Equal(int32(3)))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "always")).To(Equal(state{Replicas: 2}))
}

// TestDryRunWritesNothing counts every request the manager sends: in
// DryRun no workload is written, and status and events say what would be
// parked. Switched to Enforce, the same NSScaler parks them (the control).
func TestDryRunWritesNothing(t *testing.T) {
	requests := &requestLog{}
	startManager(t, managerOptions{requests: requests})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "dryrun")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createStatefulSet(t, ns, "db", 1)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Mode: scalingv1alpha1.ModeDryRun})
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.DryRun).To(Equal(&scalingv1alpha1.DryRunStatus{WouldPark: 2}))
		g.Expect(s.Status.Phase).To(Equal(scalingv1alpha1.PhaseAsleep))
		g.Expect(s.Status.Reason).To(Equal("dry run; no schedule: parked while selected"))
		_, reason := conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect(reason).To(Equal(scalingv1alpha1.ReasonDryRun))
	}, timeout, poll).Should(Succeed())
	expectNamespaceEvents(g, name, scalingv1alpha1.EventWouldPark, ns)
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	g.Expect(statefulSetState(g, ns, "db")).To(Equal(state{Replicas: 1}))
	g.Expect(requests.writes("/namespaces/" + ns + "/")).To(BeEmpty())

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Mode = scalingv1alpha1.ModeEnforce })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		g.Expect(getScaler(g, name).Status.DryRun).To(BeNil())
	}, timeout, poll).Should(Succeed())
	g.Expect(requests.writes("/namespaces/"+ns+"/", "/deployments/web")).To(HaveLen(1))
}

// TestProtectedNamespacesUnderABroadSelector: a label selects three
// namespaces; one is labelled protected, one matches the admin's glob; only
// the third is parked, and nothing is written in the other two.
func TestProtectedNamespacesUnderABroadSelector(t *testing.T) {
	glob := testenv.RandomName("infra") + "-*"
	requests := &requestLog{}
	startManager(t, managerOptions{protected: []string{glob}, requests: requests})
	g := NewWithT(t)
	label := map[string]string{"runbook.dev/park": testenv.RandomName("all")}
	labelled, globbed, plain := testenv.RandomName("pr-labelled"), glob[:len(glob)-1]+"monitoring", testenv.RandomName("pr-plain")
	createNamespace(t, labelled, map[string]string{"runbook.dev/park": label["runbook.dev/park"], nsscontroller.LabelProtected: "true"})
	createNamespace(t, globbed, label)
	createNamespace(t, plain, label)
	for _, ns := range []string{labelled, globbed, plain} {
		createDeployment(t, ns, "web", ptr.To[int32](2))
	}
	name := testenv.RandomName("protected-broad")
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: label}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, plain, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ParkedNamespaces).To(Equal([]string{plain}))
		c := conditionMessage(s, scalingv1alpha1.ConditionReady)
		g.Expect(c).To(ContainSubstring(labelled))
		g.Expect(c).To(ContainSubstring(globbed))
	}, timeout, poll).Should(Succeed())
	for _, ns := range []string{labelled, globbed} {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 2}))
		g.Expect(requests.writes("/namespaces/" + ns + "/")).To(BeEmpty())
	}
}

// TestHostileExclusionAnnotations: a tenant who may edit its Deployments
// writes exclusion annotations meant to break things — a 200 KiB value, a
// time without an offset, the year 9999. Each is ignored (the Deployment is
// parked all the same), reported by name without its value, and once that
// is done the manager writes nothing more (no hot loop), while a clean
// exclude-until in the same namespace works.
func TestHostileExclusionAnnotations(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	requests := &requestLog{}
	startManager(t, managerOptions{clock: clk, requests: requests})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "hostile")
	huge := strings.Repeat("x", 200<<10)
	hostile := map[string]map[string]any{
		"huge":      {nsscontroller.AnnotationExclude: huge},
		"huge-time": {nsscontroller.AnnotationExcludeUntil: huge},
		"no-offset": {nsscontroller.AnnotationExcludeUntil: "2026-12-02T12:00:00"},
		"forever":   {nsscontroller.AnnotationExcludeUntil: "9999-12-31T23:59:59Z"},
	}
	for d, ann := range hostile {
		createDeployment(t, ns, d, ptr.To[int32](2))
		patchMetadata(t, ns, d, "annotations", ann)
	}
	createDeployment(t, ns, "clean", ptr.To[int32](2))
	patchMetadata(t, ns, "clean", "annotations", map[string]any{nsscontroller.AnnotationExcludeUntil: t0.Add(time.Hour).Format(time.RFC3339)})
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})

	g.Eventually(func(g Gomega) {
		for d := range hostile {
			g.Expect(deploymentState(g, ns, d)).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}), d)
		}
		g.Expect(deploymentState(g, ns, "clean")).To(Equal(state{Replicas: 2}))
		s := getScaler(g, name)
		st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonInvalidAnnotation}))
		msg := conditionMessage(s, scalingv1alpha1.ConditionDegraded)
		g.Expect(msg).To(ContainSubstring("(and 1 more)"), "four workloads, three named")
		g.Expect(len(msg)).To(BeNumerically("<", 1024))
		g.Expect(msg).NotTo(ContainSubstring("xxxx"))
		g.Expect(msg).NotTo(ContainSubstring("9999"))
		g.Expect(s.Status.ExcludedWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.NextTransition).To(BeNil(), "exclusions are not schedule transitions")
	}, timeout, poll).Should(Succeed())
	// Settled: any reconcile from now on (the manager's own status write
	// caused some) writes nothing.
	settled := len(requests.writes())
	g.Consistently(func() []string { return requests.writes()[settled:] }, "2s", poll).Should(BeEmpty())

	// The clean exclusion ends (on the minute): parked; the hostile ones
	// changed nothing.
	clk.SetTime(t0.Add(time.Hour))
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "clean")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
	}, timeout, poll).Should(Succeed())
}
