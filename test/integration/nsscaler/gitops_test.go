package nsscaler

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	helmReleaseGVK   = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
	applicationGVK   = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
)

// createGitOpsObject creates a Flux or Argo CD object (their real CRDs) with
// spec and, when given, the status its tool would have written.
func createGitOpsObject(t *testing.T, gvk schema.GroupVersionKind, ns, name string, spec, st map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if gvk == applicationGVK && st != nil {
		u.Object["status"] = st // no status subresource: created with it
	}
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if gvk != applicationGVK && st != nil {
		u.Object["status"] = st
		if err := k8s.Status().Update(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
}

func gitOpsObject(g Gomega, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	return u
}

func fluxSpec(extra map[string]any) map[string]any {
	spec := map[string]any{"interval": "10m", "prune": true, "sourceRef": map[string]any{"kind": "GitRepository", "name": "repo"}}
	for k, v := range extra {
		spec[k] = v
	}
	return spec
}

func appSpec(destination string) map[string]any {
	return map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": destination},
		"source":      map[string]any{"repoURL": "https://git.invalid/apps.git", "path": "web"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
	}
}

// createManagedDeployment creates a Deployment with the labels and
// annotations a GitOps tool would have put on it (or a tenant forged).
func createManagedDeployment(t *testing.T, ns, name string, replicas int32, labels, annotations map[string]string) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// gitOpsToolSync plays the GitOps tool (a second field manager): unless
// its object is paused it puts the Deployment back at replicas, as Flux's
// reconcile or Argo CD's self-heal would. It reports whether it wrote.
func gitOpsToolSync(t *testing.T, g Gomega, obj *unstructured.Unstructured, ns, deployment string, replicas int32) bool {
	t.Helper()
	fresh := gitOpsObject(g, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	if obj.GroupVersionKind() == applicationGVK {
		if _, auto, _ := unstructured.NestedMap(fresh.Object, "spec", "syncPolicy", "automated"); !auto {
			return false
		}
	} else if s, _, _ := unstructured.NestedBool(fresh.Object, "spec", "suspend"); s {
		return false
	}
	manager := "kustomize-controller"
	if obj.GroupVersionKind() == applicationGVK {
		manager = "argocd-application-controller"
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deployment}}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	g.Expect(k8s.Patch(context.Background(), d, patch, client.FieldOwner(manager))).To(Succeed())
	return true
}

// gitOpsWorld is a tenant namespace whose Deployments Flux and Argo CD
// manage, next to another team's GitOps objects a tenant's labels name.
type gitOpsWorld struct {
	prefix, ns, scaler, fluxNS, argoNS, otherNS string
}

func newGitOpsWorld(t *testing.T, base string) gitOpsWorld {
	t.Helper()
	p, ns, name := oneNamespace(t, base)
	w := gitOpsWorld{prefix: p, ns: ns, scaler: name,
		fluxNS: testenv.RandomName("flux"), argoNS: testenv.RandomName("argocd"), otherNS: testenv.RandomName("team-b")}
	for _, n := range []string{w.fluxNS, w.argoNS, w.otherNS} {
		createNamespace(t, n, nil)
	}
	// Tenant's own: a Kustomization that deploys into it (inventory), an
	// Application that targets it, a HelmRelease already suspended by its
	// owner.
	createGitOpsObject(t, kustomizationGVK, w.fluxNS, "apps", fluxSpec(nil), map[string]any{
		"inventory": map[string]any{"entries": []any{map[string]any{"id": ns + "_web_apps_Deployment", "v": "v1"}}},
	})
	createGitOpsObject(t, helmReleaseGVK, w.fluxNS, "db", map[string]any{
		"interval": "10m", "suspend": true, "targetNamespace": ns,
		"chart": map[string]any{"spec": map[string]any{"chart": "db", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}},
	}, nil)
	createGitOpsObject(t, applicationGVK, w.argoNS, "web", appSpec(ns), nil)
	// Another team's, which a tenant's forged labels name.
	createGitOpsObject(t, kustomizationGVK, w.fluxNS, "team-b", fluxSpec(map[string]any{"targetNamespace": w.otherNS}), map[string]any{
		"inventory": map[string]any{"entries": []any{map[string]any{"id": w.otherNS + "_svc_apps_Deployment", "v": "v1"}}},
	})
	createGitOpsObject(t, applicationGVK, w.argoNS, "team-b", appSpec(w.otherNS), map[string]any{
		"resources": []any{map[string]any{"kind": "Deployment", "group": "apps", "namespace": w.otherNS, "name": "svc"}},
	})

	createManagedDeployment(t, ns, "web", 3, map[string]string{
		"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": w.fluxNS,
	}, nil)
	createManagedDeployment(t, ns, "api", 2, nil, map[string]string{
		nsscontroller.AnnotationArgoCDTrackingID: "web:apps/Deployment:" + ns + "/api",
	})
	createManagedDeployment(t, ns, "db", 1, map[string]string{
		"helm.toolkit.fluxcd.io/name": "db", "helm.toolkit.fluxcd.io/namespace": w.fluxNS,
	}, nil)
	createManagedDeployment(t, ns, "evil", 1, map[string]string{
		"kustomize.toolkit.fluxcd.io/name": "team-b", "kustomize.toolkit.fluxcd.io/namespace": w.fluxNS,
		"app.kubernetes.io/instance": "team-b",
	}, map[string]string{nsscontroller.AnnotationArgoCDTrackingID: w.argoNS + "_team-b:apps/Deployment:" + ns + "/evil"})
	return w
}

// expectUntouched: another team's objects carry no record and keep their
// own settings.
func (w gitOpsWorld) expectOthersUntouched(g Gomega) {
	k := gitOpsObject(g, kustomizationGVK, w.fluxNS, "team-b")
	g.Expect(k.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
	_, found, _ := unstructured.NestedFieldNoCopy(k.Object, "spec", "suspend")
	g.Expect(found).To(BeFalse(), "team-b's Kustomization suspended")
	a := gitOpsObject(g, applicationGVK, w.argoNS, "team-b")
	g.Expect(a.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
	auto, _, _ := unstructured.NestedMap(a.Object, "spec", "syncPolicy", "automated")
	g.Expect(auto).To(Equal(map[string]any{"prune": true, "selfHeal": true}))
}

func suspended(u *unstructured.Unstructured) bool {
	s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	return s
}

func gitOpsRecord(scaler, previous string) string {
	return fmt.Sprintf(`{"v":1,"by":%q,"previous":%s}`, scaler, previous)
}

// expectPaused: the tenant's Kustomization is suspended and its
// Application has no automated sync, each with what it had recorded; the
// HelmRelease its owner suspended carries no record.
func (w gitOpsWorld) expectPaused(g Gomega) {
	k := gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps")
	g.Expect(k.GetAnnotations()).To(HaveKeyWithValue(nsscontroller.AnnotationGitOpsPaused, gitOpsRecord(w.scaler, "null")))
	g.Expect(suspended(k)).To(BeTrue())
	a := gitOpsObject(g, applicationGVK, w.argoNS, "web")
	g.Expect(a.GetAnnotations()).To(HaveKeyWithValue(nsscontroller.AnnotationGitOpsPaused, gitOpsRecord(w.scaler, `{"prune":true,"selfHeal":true}`)))
	_, auto, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "syncPolicy", "automated")
	g.Expect(auto).To(BeFalse())
	h := gitOpsObject(g, helmReleaseGVK, w.fluxNS, "db")
	g.Expect(h.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
	g.Expect(suspended(h)).To(BeTrue())
}

// TestGitOpsPausedWhileParkedRestoredExactly: with spec.gitOps the
// Kustomization and the Application that manage the parked namespace are
// paused in the same write that records what they had, the tool (a second
// field manager) has nothing to put back so there is no fight, a restart
// mid-park writes nothing more, and on wake each gets back exactly what it
// had; a HelmRelease its owner suspended stays suspended. Another team's
// Kustomization and Application, named by a tenant's forged labels, are
// never touched.
func TestGitOpsPausedWhileParkedRestoredExactly(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-02T22:00:00Z"))
	fights := nsscontroller.FightPolicy{Threshold: 3, Window: 10 * time.Minute, Backoff: 5 * time.Minute}
	g := NewWithT(t)
	w := newGitOpsWorld(t, "gitops")
	first := startManager(t, managerOptions{clock: clk, fights: fights, argoCDNamespace: w.argoNS})
	createScaler(t, w.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: w.prefix,
		GitOps: &scalingv1alpha1.GitOpsSpec{Flux: true, ArgoCD: true}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, w.ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(w.scaler, 3)}))
		g.Expect(deploymentState(g, w.ns, "api")).To(Equal(state{Replicas: 0, Annotation: parkedBy(w.scaler, 2)}))
		w.expectPaused(g)
		s := getScaler(g, w.scaler)
		g.Expect(s.Status.GitOps).NotTo(BeNil())
		g.Expect(*s.Status.GitOps).To(Equal(scalingv1alpha1.GitOpsStatus{
			PausedCount: 2, PausedByOthers: 1, Unverified: 2,
			Paused: []scalingv1alpha1.GitOpsObject{
				{Kind: "Kustomization", Namespace: w.fluxNS, Name: "apps", ParkedNamespaces: []string{w.ns}},
				{Kind: "Application", Namespace: w.argoNS, Name: "web", ParkedNamespaces: []string{w.ns}},
			},
		}))
		st, reason := conditionReason(s, scalingv1alpha1.ConditionGitOpsPaused)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonGitOpsObjectsPaused}))
		g.Expect(metricValue(first.metrics.GitOps.Paused.WithLabelValues(w.scaler, "Kustomization"))).To(Equal(1.0))
		g.Expect(metricValue(first.metrics.GitOps.Paused.WithLabelValues(w.scaler, "Application"))).To(Equal(1.0))
		g.Expect(metricValue(first.metrics.GitOps.Paused.WithLabelValues(w.scaler, "HelmRelease"))).To(BeZero())
	}, timeout, poll).Should(Succeed())
	w.expectOthersUntouched(g)
	expectGitOpsEvent(g, w.scaler, scalingv1alpha1.EventGitOpsPaused, "Kustomization "+w.fluxNS+"/apps")

	// The tools have nothing to put back: no fight, nothing contested.
	for range 4 {
		clk.Step(time.Minute)
		g.Expect(gitOpsToolSync(t, g, gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps"), w.ns, "web", 3)).To(BeFalse())
		g.Expect(gitOpsToolSync(t, g, gitOpsObject(g, applicationGVK, w.argoNS, "web"), w.ns, "api", 2)).To(BeFalse())
	}
	g.Expect(getScaler(g, w.scaler).Status.ContestedWorkloads).To(BeZero())

	// A restart mid-park: the new manager finds its records and writes
	// nothing to the GitOps objects (never paused twice, the record kept).
	before := map[string]string{
		"apps": gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps").GetResourceVersion(),
		"web":  gitOpsObject(g, applicationGVK, w.argoNS, "web").GetResourceVersion(),
		"db":   gitOpsObject(g, helmReleaseGVK, w.fluxNS, "db").GetResourceVersion(),
	}
	first.stop(t)
	requests := &requestLog{}
	second := startManager(t, managerOptions{clock: clk, fights: fights, argoCDNamespace: w.argoNS, requests: requests})
	scaleDeployment(t, w.ns, "web", 3) // something to reconcile: re-parked
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, w.ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(w.scaler, 3)}))
		g.Expect(metricValue(second.metrics.GitOps.Paused.WithLabelValues(w.scaler, "Kustomization"))).To(Equal(1.0))
	}, timeout, poll).Should(Succeed())
	w.expectPaused(g)
	g.Expect(requests.writes("kustomizations")).To(BeEmpty())
	g.Expect(requests.writes("applications")).To(BeEmpty())
	g.Expect(requests.writes("helmreleases")).To(BeEmpty())
	g.Expect(gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps").GetResourceVersion()).To(Equal(before["apps"]))
	g.Expect(gitOpsObject(g, applicationGVK, w.argoNS, "web").GetResourceVersion()).To(Equal(before["web"]))

	// Wake: workloads restored, then each GitOps object gets back exactly
	// what it had; the owner's suspension stays.
	updateScaler(t, w.scaler, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{w.ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, w.ns, "web")).To(Equal(state{Replicas: 3}))
		k := gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps")
		g.Expect(k.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
		_, found, _ := unstructured.NestedFieldNoCopy(k.Object, "spec", "suspend")
		g.Expect(found).To(BeFalse(), "spec.suspend was absent before the park")
		a := gitOpsObject(g, applicationGVK, w.argoNS, "web")
		g.Expect(a.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
		auto, _, _ := unstructured.NestedMap(a.Object, "spec", "syncPolicy", "automated")
		g.Expect(auto).To(Equal(map[string]any{"prune": true, "selfHeal": true}))
		s := getScaler(g, w.scaler)
		g.Expect(s.Status.GitOps).NotTo(BeNil())
		g.Expect(s.Status.GitOps.PausedCount).To(BeZero())
	}, timeout, poll).Should(Succeed())
	h := gitOpsObject(g, helmReleaseGVK, w.fluxNS, "db")
	g.Expect(suspended(h)).To(BeTrue(), "suspended by its owner: stays suspended")
	g.Expect(h.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
	w.expectOthersUntouched(g)
	expectGitOpsEvent(g, w.scaler, scalingv1alpha1.EventGitOpsResumed, "Application "+w.argoNS+"/web")
	deleteScalerAndWait(t, w.scaler) // while the second manager runs
}

// TestWithoutGitOpsTheToolIsContested: the same world without spec.gitOps:
// nothing is paused, the tool keeps putting replicas back, and the
// contested back-off still applies to that writer.
func TestWithoutGitOpsTheToolIsContested(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-02T22:00:00Z"))
	g := NewWithT(t)
	w := newGitOpsWorld(t, "nogitops")
	startManager(t, managerOptions{clock: clk, argoCDNamespace: w.argoNS,
		fights: nsscontroller.FightPolicy{Threshold: 3, Window: 10 * time.Minute, Backoff: 5 * time.Minute}})
	createScaler(t, w.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: w.prefix})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, w.ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(w.scaler, 3)}))
	}, timeout, poll).Should(Succeed())
	apps := gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps")
	g.Expect(apps.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
	g.Expect(getScaler(g, w.scaler).Status.GitOps).To(BeNil())
	for i := range 3 {
		clk.Step(time.Minute)
		g.Expect(gitOpsToolSync(t, g, apps, w.ns, "web", 3)).To(BeTrue(), "sync %d", i)
		if i < 2 {
			g.Eventually(func(g Gomega) {
				g.Expect(deploymentState(g, w.ns, "web").Replicas).To(BeZero(), "re-parked after sync %d", i)
			}, timeout, poll).Should(Succeed())
		}
	}
	g.Eventually(func(g Gomega) {
		s := getScaler(g, w.scaler)
		g.Expect(s.Status.ContestedWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.Contested[0].Manager).To(Equal("kustomize-controller"))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, w.ns, "web").Replicas).To(Equal(int32(3)))
	w.expectOthersUntouched(g)
}

func expectGitOpsEvent(g Gomega, scaler, reason, mention string) {
	g.Eventually(func(g Gomega) {
		var l eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &l)).To(Succeed())
		var notes []string
		for _, e := range l.Items {
			if e.Regarding.Name == scaler && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(mention)), "%s events of %s", reason, scaler)
	}, timeout, poll).Should(Succeed())
}
