package nsscaler

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

// patchGitOpsObject writes to a GitOps object as another field manager
// (a person with the tool's CLI, or the tool) would.
func patchGitOpsObject(t *testing.T, u *unstructured.Unstructured, manager, body string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(u.GroupVersionKind())
	obj.SetNamespace(u.GetNamespace())
	obj.SetName(u.GetName())
	if err := k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner(manager)); err != nil {
		t.Fatal(err)
	}
}

// TestGitOpsResumedByHandWhileParkedIsPausedAgain: while the namespace is
// parked, someone resumes the Kustomization the NSScaler suspended (`flux
// resume` keeps the annotation) and switches the Application's automated
// sync back on. The watch reconciles the NSScaler at once — the fake clock
// never moves and no workload is written, so nothing else could (the
// manager's resync is hours away) — and both are paused again with the
// record of before the park, a GitOpsRepaused event naming them.
func TestGitOpsResumedByHandWhileParkedIsPausedAgain(t *testing.T) {
	clk := clocktesting.NewFakeClock(mustParse(t, "2026-12-02T22:00:00Z"))
	g := NewWithT(t)
	w := newGitOpsWorld(t, "gitwatch")
	m := startManager(t, managerOptions{clock: clk, argoCDNamespace: w.argoNS})
	createScaler(t, w.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: w.prefix,
		GitOps: &scalingv1alpha1.GitOpsSpec{Flux: true, ArgoCD: true}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, w.ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(w.scaler, 3)}))
		w.expectPaused(g)
		g.Expect(getScaler(g, w.scaler).Status.GitOps).NotTo(BeNil())
		g.Expect(getScaler(g, w.scaler).Status.GitOps.PausedCount).To(Equal(int32(2)))
	}, timeout, poll).Should(Succeed())
	pauses := metricValue(m.metrics.GitOps.Writes.WithLabelValues(w.scaler, "Kustomization", "pause", "ok"))
	g.Expect(pauses).To(Equal(1.0))

	k := gitOpsObject(g, kustomizationGVK, w.fluxNS, "apps")
	patchGitOpsObject(t, k, "flux-cli", `{"spec":{"suspend":false}}`)
	a := gitOpsObject(g, applicationGVK, w.argoNS, "web")
	patchGitOpsObject(t, a, "argocd-cli", `{"spec":{"syncPolicy":{"automated":{"selfHeal":true}}}}`)

	g.Eventually(func(g Gomega) {
		w.expectPaused(g) // suspended, automated gone, the records of before the park
		g.Expect(metricValue(m.metrics.GitOps.Writes.WithLabelValues(w.scaler, "Kustomization", "pause", "ok"))).To(Equal(2.0))
		g.Expect(metricValue(m.metrics.GitOps.Writes.WithLabelValues(w.scaler, "Application", "pause", "ok"))).To(Equal(2.0))
	}, timeout, poll).Should(Succeed())
	expectGitOpsEvent(g, w.scaler, scalingv1alpha1.EventGitOpsRepaused, "Kustomization "+w.fluxNS+"/apps")
	expectGitOpsEvent(g, w.scaler, scalingv1alpha1.EventGitOpsRepaused, "Application "+w.argoNS+"/web")
	g.Expect(getScaler(g, w.scaler).Status.GitOps.PausedCount).To(Equal(int32(2)))
	w.expectOthersUntouched(g)

	// A record forged on another team's Kustomization (it names this
	// NSScaler; the object deploys elsewhere) reconciles this NSScaler
	// alone, which finds that it manages no parked namespace and gives it
	// back what the record says — the value its owner had — without
	// touching its spec otherwise.
	other := gitOpsObject(g, kustomizationGVK, w.fluxNS, "team-b")
	patchGitOpsObject(t, other, "tenant", `{"metadata":{"annotations":{"`+nsscontroller.AnnotationGitOpsPaused+`":`+
		jsonString(gitOpsRecord(w.scaler, "false"))+`}}}`)
	g.Eventually(func(g Gomega) {
		o := gitOpsObject(g, kustomizationGVK, w.fluxNS, "team-b")
		g.Expect(o.GetAnnotations()).NotTo(HaveKey(nsscontroller.AnnotationGitOpsPaused))
		g.Expect(suspended(o)).To(BeFalse())
	}, timeout, poll).Should(Succeed())
	w.expectPaused(g)
	deleteScalerAndWait(t, w.scaler)
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
