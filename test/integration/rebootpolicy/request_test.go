package rebootpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// requestRestart does what the kubectl plugin does: a merge patch of the
// restart-request annotation.
func requestRestart(t *testing.T, ns, name, nonce string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, autorebootv1alpha1.RestartRequestAnnotation, nonce)
	rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Patch(context.Background(), rbp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func TestRestartRequestIsTakenOnceAndRecordedWithItsFire(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := createNamespace(t, "request")
	createConfigMap(t, ns, "app", map[string]string{"used": "0"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), refsPolicy()))).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &autorebootv1alpha1.RebootPolicyList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	requestRestart(t, ns, "rbp", "req-1")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	st := getRBP(t, ns, "rbp").Status
	g.Expect(st.LastRestartRequest).To(Equal("req-1"))
	g.Expect(st.RestartRequestPending).To(BeFalse())
	g.Expect(eventReasons(ns, "rbp")).To(ContainElement(autorebootv1alpha1.EventRestartRequested))
	// The first version with the nonce also holds the pending restart: one
	// status write took the request (and it preceded the restart).
	var first *autorebootv1alpha1.RebootPolicy
	g.Eventually(func() bool {
		for {
			select {
			case ev := <-w.ResultChan():
				if rbp, ok := ev.Object.(*autorebootv1alpha1.RebootPolicy); ok && ev.Type == watch.Modified && rbp.Status.LastRestartRequest == "req-1" {
					first = rbp
					return true
				}
			default:
				return false
			}
		}
	}, timeout, interval).Should(BeTrue())
	g.Expect(first.Status.RestartRequestPending).To(BeTrue(), "the nonce was recorded without its pending restart")
	g.Expect(first.Status.RestartCount).To(BeZero(), "the target was restarted before the request was recorded")

	// Patching the same nonce again is no new request.
	markRolledOut(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	before := getRBP(t, ns, "rbp").Generation
	requestRestart(t, ns, "rbp", "req-1")
	g.Expect(getRBP(t, ns, "rbp").Generation).To(Equal(before), "an annotation changed the generation")
	requestRestart(t, ns, "rbp", "req-2")
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	g.Expect(getRBP(t, ns, "rbp").Status.LastRestartRequest).To(Equal("req-2"))
	// An oversized nonce is refused and never copied into status.
	requestRestart(t, ns, "rbp", strings.Repeat("n", autorebootv1alpha1.MaxRestartRequestLength+1))
	g.Eventually(func() []string { return eventReasons(ns, "rbp") }, timeout, interval).Should(ContainElement(autorebootv1alpha1.EventRestartRequestInvalid))
	g.Expect(getRBP(t, ns, "rbp").Status.LastRestartRequest).To(Equal("req-2"))
	g.Expect(getRBP(t, ns, "rbp").Status.RestartCount).To(Equal(int64(2)))
}

func TestHostileReferences(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	t.Run("a Secret without the label is never read", func(t *testing.T) {
		ns := createNamespace(t, "refs-unlabelled")
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, StringData: map[string]string{"pw": "hunter2"}}
		g.Expect(k8s.Create(ctx, sec)).To(Succeed())
		dep := newDeployment(ns, "web")
		dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}
		g.Expect(k8s.Create(ctx, dep)).To(Succeed())
		markRolledOut(t, dep)
		rbp := newRBP(ns, "rbp", webTarget(), autorebootv1alpha1.Policy{Name: "refs", Trigger: autorebootv1alpha1.Trigger{
			Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 1}}})
		g.Expect(createRBP(t, rbp)).To(Succeed())
		g.Eventually(func(g Gomega) {
			ps := getRBP(t, ns, "rbp").Status.Policies
			g.Expect(ps).To(HaveLen(1))
			g.Expect(ps[0].Reason).To(Equal(autorebootv1alpha1.ReasonSecretNotUsable))
			g.Expect(ps[0].Message).To(ContainSubstring("not labelled " + autorebootv1alpha1.UsableLabel))
		}, timeout, interval).Should(Succeed())
		// Polled every second: a few periods later, still no restart.
		sec.StringData = map[string]string{"pw": "changed"}
		g.Expect(k8s.Update(ctx, sec)).To(Succeed())
		before := observed(ns, "rbp", "refs")
		g.Eventually(func() uint64 { return observed(ns, "rbp", "refs") }, timeout, interval).Should(BeNumerically(">=", before+3))
		expectNotRestarted(t, ns, "rbp")
		g.Expect(eventReasons(ns, "rbp")).To(ContainElement(autorebootv1alpha1.EventReferenceMissing))
	})

	t.Run("an enormous number of references is refused", func(t *testing.T) {
		ns := createNamespace(t, "refs-many")
		var env []corev1.EnvVar
		for i := range 500 {
			env = append(env, envFromKey(fmt.Sprintf("cm-%d", i), "k"))
		}
		createReferencingTarget(t, ns, "web", env...)
		g.Expect(createRBP(t, newRBP(ns, "rbp", webTarget(), refsPolicy()))).To(Succeed())
		g.Eventually(func() string {
			c := condition(getRBP(t, ns, "rbp"), autorebootv1alpha1.ConditionDegraded)
			if c == nil {
				return ""
			}
			return c.Reason
		}, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonTooManyReferences))
		expectNotRestarted(t, ns, "rbp")
	})

}
