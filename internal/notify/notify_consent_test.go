package notify

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestWebhookSecretConsentReadAtEachSend: the webhook Secret is read, label
// included, for every notification; once the label is gone nothing is
// sent to its URL, labelled again it is.
func TestWebhookSecretConsentReadAtEachSend(t *testing.T) {
	s := newSink(t, http.StatusOK)
	c := notifyClient(webhookSecret(s.URL, true))
	n, _, _, m := testNotifier(t, c, strings.TrimPrefix(s.URL, "http://"), Settings{})
	setLabel := func(on bool) {
		var sec corev1.Secret
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "hook"}, &sec); err != nil {
			t.Fatal(err)
		}
		sec.Labels = nil
		if on {
			sec.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
		}
		if err := c.Update(context.Background(), &sec); err != nil {
			t.Fatal(err)
		}
	}
	send := func() { n.Send(notifyingPolicy(), "hello"); drive(n) }
	send()
	if len(s.received()) != 1 {
		t.Fatalf("labelled: %d messages", len(s.received()))
	}
	setLabel(false)
	send()
	if len(s.received()) != 1 || m.count("refused") != 1 {
		t.Fatalf("after the label was removed: %d messages, refused %v", len(s.received()), m.count("refused"))
	}
	setLabel(true)
	send()
	if len(s.received()) != 2 {
		t.Fatalf("labelled again: %d messages", len(s.received()))
	}
}
