package nsscaler

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// TestFailingWorkloadDegradesWithoutStoppingTheOthers makes the apiserver
// refuse to scale one Deployment to zero (a ValidatingAdmissionPolicy) and
// checks that the others are parked, the failure is reported as Degraded
// WorkloadErrors, and that the workload is parked once the policy is gone.
func TestFailingWorkloadDegradesWithoutStoppingTheOthers(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "nsscaler-test-stubborn"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.metadata.name != 'stubborn' || object.spec.replicas > 0",
				Message:    "stubborn never scales to zero",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nsscaler-test-stubborn"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": "fw-a"},
			}},
		},
	}
	g.Expect(k8s.Create(ctx, policy)).To(Succeed())
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	removed := false
	removePolicy := func() {
		if !removed {
			removed = true
			g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
			g.Expect(k8s.Delete(ctx, policy)).To(Succeed())
		}
	}
	t.Cleanup(removePolicy)

	createNamespace(t, "fw-a", nil)
	createDeployment(t, "fw-a", "stubborn", ptr.To[int32](2))
	// The policy takes a moment to be enforced: wait until it denies.
	g.Eventually(func() error { return tryScaleToZero("fw-a", "stubborn") }, timeout, poll).Should(MatchError(ContainSubstring("stubborn never scales to zero")))
	for _, name := range []string{"web", "api", "worker"} {
		createDeployment(t, "fw-a", name, ptr.To[int32](3))
	}

	createScaler(t, "failing", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "fw-"})
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"web", "api", "worker"} {
			g.Expect(deploymentState(g, "fw-a", name)).To(Equal(state{Replicas: 0, Annotation: parkedBy("failing", 3)}), name)
		}
		g.Expect(deploymentState(g, "fw-a", "stubborn")).To(Equal(state{Replicas: 2}))
		s := getScaler(g, "failing")
		st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonWorkloadErrors}))
		st, reason = conditionReason(s, scalingv1alpha1.ConditionReady)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionFalse, scalingv1alpha1.ReasonReconcileError}))
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(3)))
		g.Expect(s.Status.Done).To(BeFalse(), "a workload is still running")
	}, timeout, poll).Should(Succeed())

	// The obstacle goes away: the retry (with backoff) parks it.
	removePolicy()
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "fw-a", "stubborn")).To(Equal(state{Replicas: 0, Annotation: parkedBy("failing", 2)}))
		s := getScaler(g, "failing")
		st, _ := conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect(st).To(Equal(metav1.ConditionFalse))
		g.Expect(s.Status.Done).To(BeTrue())
	}, timeout, poll).Should(Succeed())
}

// TestUnreadableAnnotationIsLeftAlone puts an annotation of a future format
// version on a workload: it is neither parked over nor restored, and the
// NSScaler says why.
func TestUnreadableAnnotationIsLeftAlone(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	createNamespace(t, "ua-a", nil)
	createDeployment(t, "ua-a", "web", ptr.To[int32](3))
	createDeployment(t, "ua-a", "future", ptr.To[int32](4))
	future := `{"v":2,"replicas":9,"by":"someone"}`
	patchAnnotation(t, "ua-a", "future", future)
	createScaler(t, "unreadable", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "ua-"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, "ua-a", "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy("unreadable", 3)}))
		st, reason := conditionReason(getScaler(g, "unreadable"), scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonInvalidAnnotation}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, "ua-a", "future")).To(Equal(state{Replicas: 4, Annotation: future}))
}
