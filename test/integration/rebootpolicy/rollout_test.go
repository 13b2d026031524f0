package rebootpolicy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// markStuck writes the status the Deployment controller writes when a
// rollout passes progressDeadlineSeconds: 1 of 3 replicas updated, the
// Progressing condition False with ProgressDeadlineExceeded.
func markStuck(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
}

// TestStuckRolloutIsRestartedAndThrottledAsOneState: a Deployment whose
// rollout passed its progress deadline is not "rolling out" — a trigger
// restarts it — and the restart that follows is in progress for the
// throttle until the Deployment controller has observed it, although the
// old ProgressDeadlineExceeded condition is still there. With
// rollout.maxConcurrent 1, the second stuck target waits for the first.
func TestStuckRolloutIsRestartedAndThrottledAsOneState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "stuck")
	deps := map[string]*appsv1.Deployment{}
	for _, name := range []string{"a", "b"} {
		dep := newDeployment(ns, name)
		g.Expect(k8s.Create(ctx, dep)).To(Succeed())
		markStuck(t, dep)
		deps[name] = dep
	}
	changeConfigMap(t, ns, "settings", "v1")
	rbp := newRBP(ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "front"}}}, watchPolicy("settings"))
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1)}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	waitBaseline(t, ns, "rbp")
	changeConfigMap(t, ns, "settings", "v2")

	restarted := func() (names []string) {
		for _, name := range []string{"a", "b"} {
			cur := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur)).To(Succeed())
			if restartedAt(cur) != "" {
				names = append(names, name)
			}
		}
		return names
	}
	g.Eventually(restarted, timeout, interval).Should(HaveLen(1), "a stuck target was not restarted")
	first := restarted()[0]
	second := map[string]string{"a": "b", "b": "a"}[first]
	// The first restart holds the only slot until its rollout is observed.
	g.Eventually(func() string {
		c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Reason
	}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonThrottled))
	g.Consistently(restarted, 3*time.Second, interval).Should(Equal([]string{first}),
		"the restart of a stuck Deployment ended for the throttle before its controller observed it")

	// The first rollout completes: the second target gets the slot.
	markRolledOut(t, deps[first])
	g.Eventually(restarted, timeout, interval).Should(ConsistOf("a", "b"), second+" was never restarted")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
}
