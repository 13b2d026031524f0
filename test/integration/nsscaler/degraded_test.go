package nsscaler

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestFailingWorkloadDegradesWithoutStoppingTheOthers makes the apiserver
// refuse to scale one Deployment to zero (a ValidatingAdmissionPolicy) and
// checks that the others are parked, the failure is reported as Degraded
// WorkloadErrors, and that the workload is parked once the policy is gone.
func TestFailingWorkloadDegradesWithoutStoppingTheOthers(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "failing")
	createDeployment(t, ns, "stubborn", ptr.To[int32](2))
	removePolicy := denyScaleToZero(t, ns, "stubborn")
	for _, d := range []string{"web", "api", "worker"} {
		createDeployment(t, ns, d, ptr.To[int32](3))
	}

	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		for _, d := range []string{"web", "api", "worker"} {
			g.Expect(deploymentState(g, ns, d)).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}), d)
		}
		g.Expect(deploymentState(g, ns, "stubborn")).To(Equal(state{Replicas: 2}))
		s := getScaler(g, name)
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
		g.Expect(deploymentState(g, ns, "stubborn")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
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
	p, ns, name := oneNamespace(t, "unreadable")
	createDeployment(t, ns, "web", ptr.To[int32](3))
	createDeployment(t, ns, "future", ptr.To[int32](4))
	future := `{"v":2,"replicas":9,"by":"someone"}`
	patchAnnotation(t, ns, "future", future)
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 3)}))
		st, reason := conditionReason(getScaler(g, name), scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonInvalidAnnotation}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "future")).To(Equal(state{Replicas: 4, Annotation: future}))
}

// denyScaleToZero makes the apiserver refuse to scale the Deployment named
// deployment in ns to zero (a ValidatingAdmissionPolicy and its binding),
// and waits until the refusal is enforced. remove lifts it; it is lifted at
// the end of the test anyway.
func denyScaleToZero(t *testing.T, ns, deployment string) (remove func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := testenv.RandomName("nsscaler-test-" + deployment)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q || object.spec.replicas > 0", deployment),
				Message:    deployment + " never scales to zero",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	g.Expect(k8s.Create(ctx, policy)).To(Succeed())
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	removed := false
	remove = func() {
		if !removed {
			removed = true
			g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
			g.Expect(k8s.Delete(ctx, policy)).To(Succeed())
		}
	}
	t.Cleanup(remove)
	// The policy takes a moment to be enforced: wait until it denies.
	g.Eventually(func() error { return tryScaleToZero(ns, deployment) }, timeout, poll).
		Should(MatchError(ContainSubstring(deployment + " never scales to zero")))
	return remove
}
