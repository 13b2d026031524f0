package rebootpolicy

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// approvalTarget is a namespace with Deployment web (rolled out) and a
// notifying RebootPolicy rbp with approval Required.
func approvalTarget(t *testing.T, prefix string) (string, *webhookSink) {
	t.Helper()
	g := NewWithT(t)
	ns := createNamespace(t, prefix)
	sink := newWebhookSink(t, http.StatusOK)
	createWebhookSecret(t, ns, sink.url, true)
	changeConfigMap(t, ns, "settings", "v1")
	dep := newDeployment(ns, "web")
	g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
	markRolledOut(t, dep)
	rbp := newRBP(ns, "rbp", webTarget(), watchPolicy("settings"))
	rbp.Spec.Approval = autorebootv1alpha1.ApprovalRequired
	rbp.Spec.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook", Key: "url"}}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	waitBaseline(t, ns, "rbp")
	return ns, sink
}

// TestApprovalRequiredHoldsEveryRestartUntilApprovedOnce: with approval
// Required a fire waits (Ready AwaitingApproval, no nextRestartTime, an
// AwaitingApproval event and a webhook message naming web) and nothing is
// restarted; one approval releases that restart exactly once, recorded
// with the approver's field manager; a later fire needs a new approval,
// and the old nonce does not count again.
func TestApprovalRequiredHoldsEveryRestartUntilApprovedOnce(t *testing.T) {
	g := NewWithT(t)
	ns, sink := approvalTarget(t, "approve")
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonAwaitingApproval))
	rbp := getRBP(t, ns, "rbp")
	g.Expect(rbp.Status.NextRestartTime).To(BeNil())
	g.Expect(rbp.Status.PendingRestarts).To(Equal(int32(1)))
	g.Expect(condition(rbp, autorebootv1alpha1.ConditionReady).Message).To(ContainSubstring("kubectl runbook approve rbp"))
	g.Eventually(sink.messages, timeout, interval).Should(ContainElement(ContainSubstring("waits for approval to restart Deployment web")))
	g.Eventually(func() []string { return eventReasons(ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventAwaitingApproval))
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, interval).Should(BeEmpty())

	setAnnotation(t, ns, "rbp", autorebootv1alpha1.ApproveAnnotation, "ok-1", "kubectl-runbook (alice)")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	first := restartedAt(getDeployment(t, ns, "web"))
	g.Expect(first).NotTo(BeEmpty())
	ap := getRBP(t, ns, "rbp").Status.Approval
	g.Expect(ap.LastApproval).To(Equal("ok-1"))
	g.Expect(ap.ApprovedBy).To(Equal("kubectl-runbook (alice)"))
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventApproved) }, timeout, interval).
		Should(ConsistOf(And(ContainSubstring("kubectl-runbook (alice)"), ContainSubstring("Deployment web"))))
	g.Eventually(sink.messages, timeout, interval).Should(ContainElement(ContainSubstring("approval ok-1 by kubectl-runbook (alice)")))

	// A later change waits for a new approval.
	markRolledOut(t, getDeployment(t, ns, "web"))
	changeConfigMap(t, ns, "settings", "v3")
	g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonAwaitingApproval))
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, interval).Should(Equal(first))
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(1)))

	setAnnotation(t, ns, "rbp", autorebootv1alpha1.ApproveAnnotation, "ok-2", "kubectl-runbook (bob)")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	g.Expect(getRBP(t, ns, "rbp").Status.Approval.ApprovedBy).To(Equal("kubectl-runbook (bob)"))
	g.Consistently(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, 3*time.Second, interval).Should(Equal(int64(2)))
}

// TestApprovalWithNothingPendingReleasesNothingLater: an approval given
// while nothing waits is recorded ("nothing was waiting") and does not
// release the next fire.
func TestApprovalWithNothingPendingReleasesNothingLater(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approvalTarget(t, "early")
	setAnnotation(t, ns, "rbp", autorebootv1alpha1.ApproveAnnotation, "early-1", "kubectl-runbook (eve)")
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventApproved) }, timeout, interval).
		Should(ConsistOf(ContainSubstring("nothing was waiting")))
	changeConfigMap(t, ns, "settings", "v2")
	g.Eventually(func() string { return reasonOf(t, ns, "rbp", autorebootv1alpha1.ConditionReady) }, timeout, interval).
		Should(Equal(autorebootv1alpha1.ReasonAwaitingApproval))
	g.Consistently(func() string { return restartedAt(getDeployment(t, ns, "web")) }, 3*time.Second, interval).Should(BeEmpty())
}

// TestGateNonceFloodIsBoundedAndRestartsNothing: whoever may patch the
// policy floods the approve and resume annotations with fresh nonces
// while nothing is pending, and sets values too long to be nonces. Effect:
// nothing restarted; at most one status write per nonce and none after
// the flood (no hot loop); a too-long value is never copied into status
// and is reported once.
func TestGateNonceFloodIsBoundedAndRestartsNothing(t *testing.T) {
	g := NewWithT(t)
	ns, _ := approvalTarget(t, "flood")
	writes := countWrites(t, ns)
	const n = 40
	patches := 0
	for i := range n {
		key := autorebootv1alpha1.ApproveAnnotation
		if i%2 == 1 {
			key = autorebootv1alpha1.ResumeAnnotation
		}
		setAnnotation(t, ns, "rbp", key, "flood-"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+time.Now().Format("150405.000000"), "tenant")
		patches++
	}
	long := strings.Repeat("z", autorebootv1alpha1.MaxRestartRequestLength+1)
	setAnnotation(t, ns, "rbp", autorebootv1alpha1.ApproveAnnotation, long, "tenant")
	patches++
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventGateRequestInvalid) }, timeout, interval).Should(HaveLen(1))

	// Quiet: the object stops changing, and stays so.
	var last int64 = -1
	g.Eventually(func() bool {
		cur := writes.Load()
		settled := cur == last
		last = cur
		return settled
	}, timeout, 2*time.Second).Should(BeTrue())
	g.Consistently(writes.Load, 5*time.Second, interval).Should(Equal(last), "writes after the flood")
	// Each patch is one write; the controller adds at most one per nonce.
	t.Logf("%d patches, %d writes of the RebootPolicy", patches, last)
	g.Expect(last).To(BeNumerically("<=", 2*patches))
	after := getRBP(t, ns, "rbp")
	// No approval in status at all is right too: a reconcile that comes
	// only after the flood sees just the too-long value and records none.
	if a := after.Status.Approval; a != nil {
		g.Expect(a.LastApproval).NotTo(Equal(long))
		g.Expect(a.Released).To(BeEmpty())
	}
	g.Expect(restartedAt(getDeployment(t, ns, "web"))).To(BeEmpty())
	g.Expect(after.Status.RestartCount).To(BeZero())
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventGateRequestInvalid) }, 3*time.Second, interval).Should(HaveLen(1))
}

// countWrites counts the changes of the RebootPolicies of ns from now on.
func countWrites(t *testing.T, ns string) *atomic.Int64 {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &autorebootv1alpha1.RebootPolicyList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return &n
}
