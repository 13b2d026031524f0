package rebootpolicy

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

const haltDeadline = 2 * time.Minute

// sequence is a RebootPolicy restarting Deployments a and b one at a time
// (maxConcurrent 1, progressDeadline 2m) on a fake-clock manager, with a
// webhook.
type sequence struct {
	ns   string
	clk  *clocktesting.FakeClock
	reg  *prometheus.Registry
	sink *webhookSink
	deps map[string]*appsv1.Deployment
}

func newSequence(t *testing.T, prefix string) *sequence {
	t.Helper()
	g := NewWithT(t)
	s := &sequence{ns: createNamespace(t, prefix), deps: map[string]*appsv1.Deployment{}, sink: newWebhookSink(t, http.StatusOK)}
	s.clk, s.reg = fakeClockManager(t, s.ns)
	createWebhookSecret(t, s.ns, s.sink.url, true)
	changeConfigMap(t, s.ns, "settings", "v1")
	for _, name := range []string{"a", "b"} {
		dep := newDeployment(s.ns, name)
		g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
		markRolledOut(t, dep)
		s.deps[name] = dep
	}
	rbp := newRBP(s.ns, "rbp", autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "front"}}}, watchPolicy("settings"))
	rbp.Labels = map[string]string{externalManagerLabel: fakeClockLabel}
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1), ProgressDeadline: &metav1.Duration{Duration: haltDeadline}}
	rbp.Spec.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook", Key: "url"}}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func() string { return reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).ShouldNot(BeEmpty())
	return s
}

func (s *sequence) restarted(t *testing.T) []string {
	var out []string
	for _, name := range []string{"a", "b"} {
		if restartedAt(getDeployment(t, s.ns, name)) != "" {
			out = append(out, name)
		}
	}
	return out
}

// haltAtA fires the policy, lets a's new pods never become available and
// passes the progress deadline: the sequence halts at a.
func (s *sequence) haltAtA(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	requestRestart(t, s.ns, "rbp", "go-1")
	g.Eventually(func() []string { return s.restarted(t) }, timeout, interval).Should(Equal([]string{"a"}))
	markNeverAvailable(t, s.deps["a"])
	g.Eventually(func() string { return reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonThrottled), "b does not wait for a's rollout")
	s.clk.Step(haltDeadline + time.Second)
	g.Eventually(func() string { return reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionDegraded) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonRolloutHalted))
}

// TestSequenceHaltsWhenARestartedTargetNeverBecomesAvailable: with
// maxConcurrent 1, a's pods never become ready; once the progress deadline
// passes (fake clock) the sequence halts — Degraded RolloutHalted, a
// Warning event on the policy and on a, a webhook message naming a, the
// halted gauge — and b is not restarted, for as long as nobody resumes.
// A resume (a nonce) is acted on once: recorded with the field manager
// that set it, b restarts; when b halts in turn, the old nonce does not
// resume it again.
func TestSequenceHaltsWhenARestartedTargetNeverBecomesAvailable(t *testing.T) {
	g := NewWithT(t)
	s := newSequence(t, "halt")
	s.haltAtA(t)
	rbp := getRBP(t, s.ns, "rbp")
	g.Expect(condition(rbp, autorebootv1alpha1.ConditionDegraded).Message).To(ContainSubstring("Deployment a"))
	g.Expect(rbp.Status.Rollout.Halted).NotTo(BeNil())
	g.Expect(rbp.Status.Rollout.Halted.Reason).To(Equal("NotAvailable"))
	g.Eventually(func() []string { return eventReasons(s.ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRolloutHalted))
	g.Eventually(func() []string { return eventReasons(s.ns, "a") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRolloutHalted))
	g.Eventually(s.sink.messages, timeout, interval).Should(ContainElement(ContainSubstring("halted its rollout at Deployment a")))
	g.Expect(gauge(t, s.reg, "runbook_rebootpolicy_halted")).To(Equal(1.0))
	// Time goes on: still halted, b untouched.
	s.clk.Step(time.Hour)
	g.Consistently(func() []string { return s.restarted(t) }, 5*time.Second, interval).Should(Equal([]string{"a"}), "b restarted while halted")
	g.Expect(reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionDegraded)).To(Equal(autorebootv1alpha1.ReasonRolloutHalted))

	setAnnotation(t, s.ns, "rbp", autorebootv1alpha1.ResumeAnnotation, "resume-1", "kubectl-runbook (alice)")
	g.Eventually(func() []string { return s.restarted(t) }, timeout, interval).Should(Equal([]string{"a", "b"}), "resume did not go on with b")
	rbp = getRBP(t, s.ns, "rbp")
	g.Expect(rbp.Status.Rollout.LastResume).To(Equal("resume-1"))
	g.Expect(rbp.Status.Rollout.ResumedBy).To(Equal("kubectl-runbook (alice)"))
	g.Eventually(func() []string { return eventNotes(s.ns, "rbp", autorebootv1alpha1.EventRolloutResumed) }, timeout, interval).
		Should(ConsistOf(ContainSubstring("kubectl-runbook (alice)")))
	g.Eventually(func() float64 { return gauge(t, s.reg, "runbook_rebootpolicy_halted") }, timeout, interval).Should(BeZero())
	g.Expect(gauge(t, s.reg, "runbook_rebootpolicy_resumes_total")).To(Equal(1.0))

	// b never becomes available either: halted at b; the resume taken
	// before does not count again, whatever reconciles the policy.
	markNeverAvailable(t, s.deps["b"])
	s.clk.Step(haltDeadline + time.Second)
	g.Eventually(func() string {
		h := getRBP(t, s.ns, "rbp").Status.Rollout.Halted
		if h == nil {
			return ""
		}
		return h.Name
	}, timeout, interval).Should(Equal("b"))
	dep := getDeployment(t, s.ns, "b")
	dep.Labels["touched"] = "1"
	g.Expect(k8s.Update(context.Background(), dep)).To(Succeed())
	g.Consistently(func() string { return reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionDegraded) }, 3*time.Second, interval).
		Should(Equal(autorebootv1alpha1.ReasonRolloutHalted))
	g.Expect(eventNotes(s.ns, "rbp", autorebootv1alpha1.EventRolloutResumed)).To(HaveLen(1))
	g.Expect(getRBP(t, s.ns, "rbp").Status.RestartCount).To(Equal(int64(2)))
}

// TestHaltedSequenceGoesOnWhenTheTargetRecoversByItself: the Deployment
// controller gives up on a (ProgressDeadlineExceeded, its own
// progressDeadlineSeconds: no clock step needed) — halted; then a becomes
// available by itself: the halt lifts without a resume (RolloutRecovered)
// and b restarts.
func TestHaltedSequenceGoesOnWhenTheTargetRecoversByItself(t *testing.T) {
	g := NewWithT(t)
	s := newSequence(t, "recover")
	requestRestart(t, s.ns, "rbp", "go-1")
	g.Eventually(func() []string { return s.restarted(t) }, timeout, interval).Should(Equal([]string{"a"}))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := getDeployment(t, s.ns, "a")
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}
		return k8s.Status().Update(context.Background(), dep)
	})).To(Succeed())
	g.Eventually(func() string {
		h := getRBP(t, s.ns, "rbp").Status.Rollout
		if h == nil || h.Halted == nil {
			return ""
		}
		return h.Halted.Reason
	}, timeout, interval).Should(Equal("ProgressDeadlineExceeded"))
	g.Consistently(func() []string { return s.restarted(t) }, 3*time.Second, interval).Should(Equal([]string{"a"}))

	markAvailable(t, s.deps["a"], s.clk.Now())
	g.Eventually(func() []string { return s.restarted(t) }, timeout, interval).Should(Equal([]string{"a", "b"}))
	g.Eventually(func() string { return reasonOf(t, s.ns, "rbp", autorebootv1alpha1.ConditionDegraded) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonAsExpected))
	g.Eventually(func() []string { return eventReasons(s.ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRolloutRecovered))
	g.Expect(getRBP(t, s.ns, "rbp").Status.Rollout.LastResume).To(BeEmpty())
	g.Eventually(s.sink.messages, timeout, interval).Should(ContainElement(ContainSubstring("became available")))
}
