package rebootpolicy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// webhookSink receives notifications on the suite's external server, the
// one address the manager may reach (--probe-allow in TestMain).
type webhookSink struct {
	url  string
	code int
	mu   sync.Mutex
	msgs []string
}

func newWebhookSink(t *testing.T, code int) *webhookSink {
	s := &webhookSink{code: code}
	prefix := external.handle(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]string
		if json.Unmarshal(b, &body) == nil && r.Method == http.MethodPost {
			s.mu.Lock()
			s.msgs = append(s.msgs, body["text"])
			s.mu.Unlock()
		}
		w.WriteHeader(s.code)
	}))
	s.url = external.URL + prefix + "/hook"
	return s
}

func (s *webhookSink) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func createWebhookSecret(t *testing.T, ns, url string, labelled bool) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"}, StringData: map[string]string{"url": url}}
	if labelled {
		sec.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
	}
	if err := k8s.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
}

func notifyingRBP(ns string) *autorebootv1alpha1.RebootPolicy {
	rbp := newRBP(ns, "rbp", webTarget(), refsPolicy())
	rbp.Spec.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook", Key: "url"}}
	return rbp
}

// notifyingTarget is a namespace with a ConfigMap, a Deployment web
// referencing it, and a notifying RebootPolicy whose webhook is url.
func notifyingTarget(t *testing.T, prefix, url string, labelled bool) string {
	t.Helper()
	ns := createNamespace(t, prefix)
	createConfigMap(t, ns, "app", map[string]string{"used": "0"})
	createReferencingTarget(t, ns, "web", envFromKey("app", "used"))
	createWebhookSecret(t, ns, url, labelled)
	NewWithT(t).Expect(createRBP(t, notifyingRBP(ns))).To(Succeed())
	trackedTargets(t, ns, "rbp", 1)
	return ns
}

func eventNotes(ns, name, reason string) []string {
	return testenv.EventNotes(k8s, ns, name, reason)
}

func TestNotificationSinkReceivesOneMessagePerRestart(t *testing.T) {
	g := NewWithT(t)
	good := newWebhookSink(t, http.StatusOK)
	failing := newWebhookSink(t, http.StatusInternalServerError)
	ns := notifyingTarget(t, "notify", good.url, true)
	bad := notifyingTarget(t, "notify-failing", failing.url, true)
	retriedBefore := counterSum(t, "runbook_rebootpolicy_notifications_total", "outcome", "retried")

	for i, v := range []string{"1", "2"} {
		setData(t, ns, "app", "used", v)
		setData(t, bad, "app", "used", v)
		// The failing sink blocks nothing: both restart, every time.
		g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(i + 1)))
		g.Eventually(func() int64 { return getRBP(t, bad, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(i + 1)))
		g.Eventually(good.messages, timeout, interval).Should(HaveLen(i + 1))
		// envtest runs no Deployment controller: finish the rollouts.
		for _, n := range []string{ns, bad} {
			markRolledOut(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "web"}})
		}
	}
	msgs := good.messages()
	g.Expect(msgs[0]).To(ContainSubstring("restarted Deployment web"))
	g.Expect(msgs[0]).To(ContainSubstring("RebootPolicy " + ns + "/rbp"))
	// A restart notified twice would show by now (the second message came
	// after the first restart's).
	g.Consistently(good.messages, "1s", interval).Should(HaveLen(2), "a restart was notified twice")
	g.Eventually(func() float64 { return counterSum(t, "runbook_rebootpolicy_notifications_total", "outcome", "retried") },
		timeout, interval).Should(BeNumerically(">", retriedBefore))
	g.Expect(len(failing.messages())).To(BeNumerically(">=", 2), "the failing sink was not tried")
}

// A webhook URL the manager's network policy refuses (the apiserver, on
// loopback) and one in an unlabelled Secret are never sent, and say so in
// an event that does not repeat the URL.
func TestHostileWebhooks(t *testing.T) {
	g := NewWithT(t)
	apiserver := env.Config.Host
	if !strings.Contains(apiserver, "://") {
		apiserver = "https://" + apiserver
	}
	apiserver += "/api/v1/namespaces/kube-system/secrets"
	for _, tc := range []struct {
		name, url string
		labelled  bool
		why       string
	}{
		{"the apiserver", apiserver, true, "not allowed by the manager's network policy"},
		{"a Secret without the label", newWebhookSink(t, http.StatusOK).url, false, "not labelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := notifyingTarget(t, "notify-hostile", tc.url, tc.labelled)
			setData(t, ns, "app", "used", "1")
			g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
			var notes []string
			g.Eventually(func() []string {
				notes = eventNotes(ns, "rbp", autorebootv1alpha1.EventNotificationFailed)
				return notes
			}, timeout, interval).ShouldNot(BeEmpty())
			g.Expect(notes[0]).To(ContainSubstring(tc.why))
			g.Expect(strings.Join(notes, " ")).NotTo(ContainSubstring(tc.url))
			g.Expect(managerLogs.String()).NotTo(ContainSubstring(tc.url))
		})
	}
}
