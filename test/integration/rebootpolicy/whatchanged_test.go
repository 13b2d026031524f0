package rebootpolicy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// expectNamedNotValued waits until the policy's Restarted event, the
// target's Restarted event and a webhook message name the change, and
// checks that no value written appears in status, events, the webhook
// messages or the manager's logs.
func expectNamedNotValued(t *testing.T, ns string, sink *webhookSink, change string, values ...string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement(ContainSubstring(change)))
	g.Eventually(func() []string { return eventNotes(ns, "web", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement(And(HavePrefix("restarted by RebootPolicy rbp (policies: "), ContainSubstring(change))))
	g.Eventually(sink.messages, timeout, interval).Should(ContainElement(And(
		HavePrefix("RebootPolicy "+ns+"/rbp restarted Deployment web (policies: "), ContainSubstring(change))))
	seen := visibleText(t, ns) + strings.Join(sink.messages(), "\n")
	for _, v := range values {
		g.Expect(seen).NotTo(ContainSubstring(v), "a value reached status, an event, a webhook message or the logs")
	}
}

func TestReferencedConfigMapKeyChangeIsNamed(t *testing.T) {
	g := NewWithT(t)
	sink := newWebhookSink(t, http.StatusOK)
	ns := createNamespace(t, "named-cm")
	createConfigMap(t, ns, "app-config", map[string]string{"db.url": "postgres://old-" + suffix(), "keep": "k"})
	// Every key counts through envFrom, so that an added key is named.
	dep := newDeployment(ns, "web")
	dep.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
	g.Expect(k8s.Create(context.Background(), dep)).To(Succeed())
	markRolledOut(t, dep)
	createWebhookSecret(t, ns, sink.url, true)
	g.Expect(createRBP(t, notifyingRBP(ns))).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	newURL, added := "postgres://new-"+suffix(), "on-"+suffix()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-config"}, &cm); err != nil {
			return err
		}
		cm.Data["db.url"], cm.Data["feature.x"] = newURL, added
		return k8s.Update(context.Background(), &cm)
	})).To(Succeed())

	change := "ConfigMap app-config: keys db.url changed, feature.x added"
	g.Eventually(func() string {
		ts := firstPolicy(t, ns).Targets
		if len(ts) != 1 {
			return ""
		}
		return ts[0].LastChange
	}, timeout, interval).Should(Equal(change))
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement("policy refs fired: Deployment web: " + change + "; restarted Deployment web (policies: refs (" + change + "))"))
	expectNamedNotValued(t, ns, sink, change, newURL, added, "postgres://")
}

func TestWatchedSecretKeyChangeIsNamed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sink := newWebhookSink(t, http.StatusOK)
	ns := createNamespace(t, "named-secret")
	oldPW, newPW, token := "hunter2-"+suffix(), "correct-horse-"+suffix(), "tok-"+suffix()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		StringData: map[string]string{"password": oldPW, "user": "app", "old": "o"}}
	g.Expect(k8s.Create(ctx, sec)).To(Succeed())
	createReferencingTarget(t, ns, "web")
	createWebhookSecret(t, ns, sink.url, true)
	rbp := newRBP(ns, "rbp", webTarget(), autorebootv1alpha1.Policy{Name: "creds", Trigger: autorebootv1alpha1.Trigger{
		Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "creds", PeriodSeconds: 1}}})
	rbp.Spec.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook", Key: "url"}}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	g.Eventually(func() string { return firstPolicy(t, ns).Message }, timeout, interval).Should(Equal("baseline recorded"))

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sec), &s); err != nil {
			return err
		}
		s.Data["password"], s.Data["token"] = []byte(newPW), []byte(token)
		delete(s.Data, "old")
		return k8s.Update(ctx, &s)
	})).To(Succeed())

	change := "Secret creds: keys password changed, token added, old removed"
	g.Eventually(func() string { return firstPolicy(t, ns).LastChange }, timeout, interval).Should(Equal(change))
	g.Eventually(func() []string { return eventNotes(ns, "rbp", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement("policy creds fired: " + change + "; restarted Deployment web (policies: creds (" + change + "))"))
	expectNamedNotValued(t, ns, sink, change, oldPW, newPW, token)
}

// firstPolicy is the status of rbp's first policy (zero before any).
func firstPolicy(t *testing.T, ns string) autorebootv1alpha1.PolicyStatus {
	if ps := getRBP(t, ns, "rbp").Status.Policies; len(ps) > 0 {
		return ps[0]
	}
	return autorebootv1alpha1.PolicyStatus{}
}

// TestWhatChangedAcrossManagerRestarts runs the real manager binary: a fire
// recorded in status keeps naming its change when another manager makes
// the restart; a change made while no manager runs still fires once the
// next one starts, and says the keys are unknown (per-key digests live in
// memory only).
func TestWhatChangedAcrossManagerRestarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bin, kubeconfig := managerBinary(t)
	ns := createNamespace(t, "named-restart")
	createFleet(t, ns, 1)
	first := startBinary(t, bin, kubeconfig, ns)
	defer func() { first.DumpLogsOnFailure(t.Failed()) }()
	rbp := binaryRBP(ns, "rbp", fleetTarget())
	// The restart waits for the settle delay, so that the fire is in
	// status and the restart still to be made when the manager dies.
	rbp.Spec.SettleDelay = &metav1.Duration{Duration: time.Hour}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)

	setData(t, ns, "shared", "v", "value-"+suffix())
	change := "ConfigMap shared: key v changed"
	g.Eventually(func() []autorebootv1alpha1.ReferencedTargetStatus { return firstPolicy(t, ns).Targets }, timeout, interval).Should(
		ConsistOf(And(HaveField("PendingTrigger", true), HaveField("LastChange", change))))
	first.Kill()

	// The next manager finds the fire in status and restarts at once.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getRBP(t, ns, "rbp")
		cur.Spec.SettleDelay = &metav1.Duration{}
		return k8s.Update(ctx, cur)
	})).To(Succeed())
	second := startBinary(t, bin, kubeconfig, ns)
	g.Eventually(func() []string { return eventNotes(ns, "d00", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ConsistOf("restarted by RebootPolicy rbp (policies: refs (" + change + "))"))
	markRolledOut(t, newDeployment(ns, "d00"))
	g.Expect(second.Stop()).To(Succeed())
	second.DumpLogsOnFailure(t.Failed())

	// Changed while no manager runs.
	setData(t, ns, "shared", "v", "value-"+suffix())
	third := startBinary(t, bin, kubeconfig, ns)
	defer func() {
		g.Expect(third.Stop()).To(Succeed())
		third.DumpLogsOnFailure(t.Failed())
	}()
	g.Eventually(func() []string { return eventNotes(ns, "d00", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement("restarted by RebootPolicy rbp (policies: refs (referenced data changed (which keys is unknown: the manager had not seen the previous data)))"))
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	markRolledOut(t, newDeployment(ns, "d00"))

}
