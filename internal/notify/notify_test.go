package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/egress"
)

// sink is a webhook receiver that answers with code.
type sink struct {
	*httptest.Server
	mu     sync.Mutex
	code   int
	bodies []string
}

func newSink(t *testing.T, code int) *sink {
	s := &sink{code: code}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		code := s.code
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func webhookSecret(url string, labelled bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hook"}, Data: map[string][]byte{"url": []byte(url)}}
	if labelled {
		s.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
	}
	return s
}

func notifyingPolicy() *autorebootv1alpha1.RebootPolicy {
	rbp := testPolicy()
	rbp.Spec.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook", Key: "url"}}
	return rbp
}

// countingMetrics counts the notifications by outcome.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]float64
}

func (c *countingMetrics) Notification(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[outcome]++
}

func (c *countingMetrics) count(outcome string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[outcome]
}

var testStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testPolicy is a RebootPolicy as the notifier sees it.
func testPolicy() *autorebootv1alpha1.RebootPolicy {
	return &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rbp", UID: "uid-1", Generation: 1}}
}

// emptyCluster is a cluster with no Services, pods or apiserver addresses:
// only the built-in denials and the test's allow rules decide.
type emptyCluster struct{}

func (emptyCluster) ServiceCIDRs(context.Context) ([]netip.Prefix, error)     { return nil, nil }
func (emptyCluster) ServiceIPs(context.Context, string) ([]netip.Addr, error) { return nil, nil }
func (emptyCluster) PodsWithIP(context.Context, netip.Addr) ([]egress.PodRef, error) {
	return nil, nil
}
func (emptyCluster) APIServerAddrs(context.Context) ([]netip.Addr, error) { return nil, nil }

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	return scheme
}

func testNotifier(t *testing.T, c client.Reader, allow string, settings Settings) (*Notifier, *clocktesting.FakeClock, *events.FakeRecorder, *countingMetrics) {
	t.Helper()
	var rules []egress.Rule
	if allow != "" {
		var err error
		if rules, err = egress.ParseRules(allow); err != nil {
			t.Fatal(err)
		}
	}
	fc := clocktesting.NewFakeClock(testStart)
	rec := events.NewFakeRecorder(100)
	m := &countingMetrics{n: map[string]float64{}}
	network := egress.New(egress.Settings{Allow: rules}, emptyCluster{})
	return New(settings, c, network, fc, status.Events{Recorder: rec}, m, logr.Discard()), fc, rec, m
}

func notifyClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).Build()
}

// drive delivers what is due, as a sender would, until nothing is.
func drive(n *Notifier) int {
	sent := 0
	for {
		m, _ := n.next()
		if m == nil {
			return sent
		}
		n.deliver(context.Background(), m)
		sent++
	}
}

func TestNotifierSendsASlackCompatibleMessage(t *testing.T) {
	s := newSink(t, http.StatusOK)
	n, _, _, m := testNotifier(t, notifyClient(webhookSecret(s.URL+"/hook", true)), strings.TrimPrefix(s.URL, "http://"), Settings{})
	n.Send(notifyingPolicy(), "RebootPolicy %s restarted %s", "ns/rbp", "Deployment web")
	if got := drive(n); got != 1 {
		t.Fatalf("%d deliveries", got)
	}
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("received %v", got)
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(got[0]), &body); err != nil || body["text"] != "RebootPolicy ns/rbp restarted Deployment web" {
		t.Fatalf("body %q (%v)", got[0], err)
	}
	if v := m.count("sent"); v != 1 {
		t.Fatalf("sent = %v", v)
	}
	// A policy without notify sends nothing.
	n.Send(testPolicy(), "x")
	if drive(n) != 0 {
		t.Fatal("a policy without spec.notify queued a message")
	}
}

func TestNotifierRetriesWithBackoffThenGivesUp(t *testing.T) {
	s := newSink(t, http.StatusInternalServerError)
	n, fc, rec, m := testNotifier(t, notifyClient(webhookSecret(s.URL, true)), strings.TrimPrefix(s.URL, "http://"), Settings{Attempts: 3})
	n.Send(notifyingPolicy(), "hello")
	if drive(n) != 1 {
		t.Fatal("first attempt not made")
	}
	// Not due yet: the back-off holds it.
	if drive(n) != 0 {
		t.Fatal("retried without waiting")
	}
	fc.Step(time.Second)
	if drive(n) != 1 {
		t.Fatal("second attempt not made after 1s")
	}
	fc.Step(time.Second)
	if drive(n) != 0 {
		t.Fatal("the back-off did not double")
	}
	fc.Step(time.Second)
	if drive(n) != 1 {
		t.Fatal("third attempt not made after 2s")
	}
	fc.Step(time.Hour)
	if drive(n) != 0 || len(s.received()) != 3 {
		t.Fatalf("attempts after giving up: %d received", len(s.received()))
	}
	if v := m.count("failed"); v != 1 {
		t.Fatalf("failed = %v", v)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, autorebootv1alpha1.EventNotificationFailed) || strings.Contains(e, s.URL) {
			t.Fatalf("event %q", e)
		}
	default:
		t.Fatal("no NotificationFailed event")
	}
}

func TestNotifierHostileInputs(t *testing.T) {
	s := newSink(t, http.StatusOK)
	cases := []struct {
		name   string
		secret *corev1.Secret
		allow  string
	}{
		{"a Secret without the label", webhookSecret(s.URL, false), strings.TrimPrefix(s.URL, "http://")},
		{"loopback not allowed by the network policy", webhookSecret(s.URL, true), ""},
		{"the apiserver's usual port on loopback", webhookSecret("https://127.0.0.1:6443/api", true), strings.TrimPrefix(s.URL, "http://")},
		{"cloud metadata", webhookSecret("http://169.254.169.254/latest/meta-data/", true), ""},
		{"not an http URL", webhookSecret("file:///var/run/secrets/kubernetes.io/serviceaccount/token", true), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, _, rec, m := testNotifier(t, notifyClient(tc.secret), tc.allow, Settings{})
			n.Send(notifyingPolicy(), "hello")
			if drive(n) != 1 {
				t.Fatal("not attempted")
			}
			if v := m.count("refused"); v != 1 {
				t.Fatalf("refused = %v (retried %v)", v, m.count("retried"))
			}
			e := <-rec.Events
			if strings.Contains(e, "169.254") || strings.Contains(e, "6443") || strings.Contains(e, "token") {
				t.Fatalf("the event names the URL: %q", e)
			}
		})
	}
	if len(s.received()) != 0 {
		t.Fatalf("the sink received %d messages", len(s.received()))
	}
}

func TestNotifierQueueIsBounded(t *testing.T) {
	n, _, _, m := testNotifier(t, notifyClient(), "", Settings{QueueSize: 10, PerNamespace: 3})
	for range 5 {
		n.Send(notifyingPolicy(), "x")
	}
	other := notifyingPolicy()
	other.Namespace = "other"
	n.Send(other, "y")
	if len(n.queue) != 4 {
		t.Fatalf("queued %d, want 3 of ns and 1 of other", len(n.queue))
	}
	if v := m.count("dropped"); v != 2 {
		t.Fatalf("dropped = %v", v)
	}
	long := strings.Repeat("é", maxNotificationText)
	n2, _, _, _ := testNotifier(t, notifyClient(), "", Settings{})
	n2.Send(notifyingPolicy(), "%s", long)
	if len(n2.queue[0].text) > maxNotificationText {
		t.Fatalf("text of %d bytes queued", len(n2.queue[0].text))
	}
}

// A failing sink blocks nothing: send returns at once, senders run apart.
func TestNotifierNeverBlocksTheCaller(t *testing.T) {
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	n, _, _, _ := testNotifier(t, notifyClient(webhookSecret(slow.URL, true)), strings.TrimPrefix(slow.URL, "http://"),
		Settings{Timeout: time.Minute})
	n.clock = clocktesting.NewFakeClock(testStart)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = n.Start(ctx) }()
	start := time.Now()
	for range 100 {
		n.Send(notifyingPolicy(), "x")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("queuing 100 messages took %s", d)
	}
}

// The webhooks' Transport takes no proxy from the environment (the
// probes' side is TestHTTPTransportsUseNoProxy in internal/probe).
func TestWebhookTransportUsesNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	n, _, _, _ := testNotifier(t, notifyClient(), "", Settings{})
	if tr := n.client("app").Transport.(*http.Transport); tr.Proxy != nil {
		t.Error("the webhook transport has a Proxy")
	}
}
