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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

// gitopsScale scales a Deployment up as a GitOps tool would, under its own
// field manager, and waits until the controller has answered (re-parked it
// or left it alone): the Deployment's generation moved past the scale-up.
func gitopsScale(t *testing.T, g Gomega, ns, name string, replicas int32) int64 {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	g.Expect(k8s.Patch(context.Background(), d, patch, client.FieldOwner("gitops-bot"))).To(Succeed())
	return d.Generation
}

// TestFightBackOff: a second writer ("gitops-bot") keeps scaling a parked
// Deployment back up. The first two scale-ups are re-parked; the third
// within the window makes it contested: left at the writer's count, named
// in a Contested condition, an event and status; after the back-off the
// controller re-parks once, and when the writer scales up again it backs
// off twice as long.
func TestFightBackOff(t *testing.T) {
	t0 := mustParse(t, "2026-12-02T10:00:00Z")
	clk := clocktesting.NewFakeClock(t0)
	startManager(t, managerOptions{clock: clk, fights: nsscontroller.FightPolicy{Threshold: 3, Window: 10 * time.Minute, Backoff: 5 * time.Minute}})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "fight")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createDeployment(t, ns, "quiet", ptr.To[int32](1))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	parked := state{Replicas: 0, Annotation: parkedBy(name, 3)}
	g.Eventually(func(g Gomega) { g.Expect(deploymentState(g, ns, "web")).To(Equal(parked)) }, timeout, poll).Should(Succeed())

	reparked := func(generation int64) {
		g.Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
			g.Expect(d.Generation).To(BeNumerically(">", generation))
			g.Expect(deploymentState(g, ns, "web")).To(Equal(parked))
		}, timeout, poll).Should(Succeed())
	}
	for i := range 2 {
		clk.Step(time.Minute)
		reparked(gitopsScale(t, g, ns, "web", int32(5+i)))
	}
	clk.Step(time.Minute)
	gitopsScale(t, g, ns, "web", 7)
	retryAt := t0.Add(3*time.Minute + 5*time.Minute)
	g.Eventually(func(g Gomega) {
		s := getScaler(g, name)
		g.Expect(s.Status.ContestedWorkloads).To(Equal(int32(1)))
		g.Expect(s.Status.Contested).To(HaveLen(1))
		g.Expect(inUTC(s.Status.Contested[0])).To(Equal(scalingv1alpha1.ContestedWorkload{
			Kind: "Deployment", Namespace: ns, Name: "web", Manager: "gitops-bot", RetryAt: metav1.NewTime(retryAt),
		}))
		st, reason := conditionReason(s, scalingv1alpha1.ConditionContested)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonFieldManagerConflict}))
		g.Expect(conditionMessage(s, scalingv1alpha1.ConditionContested)).To(ContainSubstring(`by "gitops-bot"`))
	}, timeout, poll).Should(Succeed())
	expectContestedEvent(g, name, "gitops-bot")
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 7, Annotation: parkedBy(name, 3)}), "left at the writer's count")
	g.Expect(deploymentState(g, ns, "quiet")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 1)}))

	// The back-off ends: re-parked once.
	clk.SetTime(retryAt)
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(parked))
		g.Expect(getScaler(g, name).Status.ContestedWorkloads).To(BeZero())
	}, timeout, poll).Should(Succeed())
	// The writer comes back at once: a back-off twice as long.
	clk.Step(time.Minute)
	gitopsScale(t, g, ns, "web", 7)
	g.Eventually(func(g Gomega) {
		c := getScaler(g, name).Status.Contested
		g.Expect(c).To(HaveLen(1))
		g.Expect(c[0].RetryAt.Time.Equal(retryAt.Add(time.Minute+10*time.Minute))).To(BeTrue(), "retry at %s", c[0].RetryAt)
	}, timeout, poll).Should(Succeed())
}

func expectContestedEvent(g Gomega, scaler, manager string) {
	g.Eventually(func(g Gomega) {
		var l eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &l)).To(Succeed())
		found := false
		for _, e := range l.Items {
			if e.Regarding.Name == scaler && e.Reason == scalingv1alpha1.EventWorkloadContested && e.Type == "Warning" {
				g.Expect(e.Note).To(ContainSubstring(fmt.Sprintf("field manager %q", manager)))
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "no %s event", scalingv1alpha1.EventWorkloadContested)
	}, timeout, poll).Should(Succeed())
}
