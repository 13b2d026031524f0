// Package notify sends RebootPolicies' webhook notifications: queued by
// a reconcile, sent in the background through the egress guard of the
// policy's namespace, the URL read from a Secret that consents to it.
package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/probe"
)

// Settings bound webhook notifications (admin flags); zero values
// take the defaults.
type Settings struct {
	// QueueSize is the most messages waiting, manager-wide (default 512);
	// PerNamespace the most of one namespace (default 32). Beyond them a
	// message is dropped and counted.
	QueueSize    int
	PerNamespace int
	// Attempts per message (default 5), with a back-off from 1 s doubling
	// up to 1 min; Timeout per attempt (default 5 s); Senders sending at
	// once (default 4).
	Attempts int
	Timeout  time.Duration
	Senders  int
}

func (s Settings) withDefaults() Settings {
	if s.QueueSize <= 0 {
		s.QueueSize = 512
	}
	if s.PerNamespace <= 0 {
		s.PerNamespace = 32
	}
	if s.Attempts <= 0 {
		s.Attempts = 5
	}
	if s.Timeout <= 0 {
		s.Timeout = 5 * time.Second
	}
	if s.Senders <= 0 {
		s.Senders = 4
	}
	return s
}

// Bounds of what a tenant's webhook costs the manager.
const (
	maxNotificationText = 3000
	maxWebhookURL       = 2048
	maxWebhookAnswer    = 4096
	maxNotifyBackoff    = time.Minute
)

// notification is one message to send.
type notification struct {
	policy    types.NamespacedName
	uid       types.UID
	secret    autorebootv1alpha1.SecretKeySelector
	text      string
	attempt   int
	notBefore time.Time
}

// Metrics counts the notifications by outcome (sent, retried, failed,
// refused, dropped).
type Metrics interface {
	Notification(outcome string)
}

// Notifier sends Slack-compatible webhook messages ({"text": ...}) in the
// background: a reconcile only queues (never blocks, never fails because of
// a webhook), senders retry with back-off, the queue is bounded, the URL
// is read from a labelled Secret at send time and every connection goes
// through the egress guard of the RebootPolicy's namespace. A message is
// best effort: events and metrics are the record.
type Notifier struct {
	settings Settings
	reader   client.Reader
	network  *egress.Policy
	clock    clock.Clock
	events   status.Events
	metrics  Metrics
	log      logr.Logger

	mu     sync.Mutex
	queue  []*notification
	perNS  map[string]int
	signal chan struct{}
}

// New builds the notifier; it sends once the manager starts it.
func New(settings Settings, reader client.Reader, network *egress.Policy, clk clock.Clock, events status.Events, m Metrics, log logr.Logger) *Notifier {
	return &Notifier{
		settings: settings.withDefaults(), reader: reader, network: network, clock: clk, events: events, metrics: m, log: log,
		perNS: map[string]int{}, signal: make(chan struct{}, 1),
	}
}

// Send queues a message about rbp if it asks for notifications.
func (n *Notifier) Send(rbp *autorebootv1alpha1.RebootPolicy, format string, args ...any) {
	if n == nil || rbp.Spec.Notify == nil {
		return
	}
	text := probe.Truncate(fmt.Sprintf(format, args...), maxNotificationText)
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) >= n.settings.QueueSize || n.perNS[rbp.Namespace] >= n.settings.PerNamespace {
		n.metrics.Notification("dropped")
		return
	}
	n.queue = append(n.queue, &notification{
		policy: types.NamespacedName{Namespace: rbp.Namespace, Name: rbp.Name}, uid: rbp.UID,
		secret: rbp.Spec.Notify.WebhookSecretRef, text: text, notBefore: n.clock.Now(),
	})
	n.perNS[rbp.Namespace]++
	n.poke()
}

func (n *Notifier) poke() {
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

// NeedLeaderElection: only the leader restarts, so only it notifies.
func (n *Notifier) NeedLeaderElection() bool { return true }

// Start runs the senders until ctx ends; what is still queued then is lost.
func (n *Notifier) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range n.settings.Senders {
		wg.Go(func() { n.sender(ctx) })
	}
	wg.Wait()
	return nil
}

func (n *Notifier) sender(ctx context.Context) {
	for {
		m, wait := n.next()
		if m == nil {
			timer := n.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-n.signal:
			case <-timer.C():
			}
			timer.Stop()
			continue
		}
		n.deliver(ctx, m)
		if ctx.Err() != nil {
			return
		}
	}
}

// next takes the first message that is due, or says how long until one is.
func (n *Notifier) next() (*notification, time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	wait := time.Minute
	for i, m := range n.queue {
		if !m.notBefore.After(now) {
			n.queue = append(n.queue[:i:i], n.queue[i+1:]...)
			return m, 0
		}
		wait = min(wait, m.notBefore.Sub(now))
	}
	return nil, wait
}

// deliver makes one attempt and requeues, gives up or finishes.
func (n *Notifier) deliver(ctx context.Context, m *notification) {
	err := n.post(ctx, m)
	var refused *refusedError
	switch {
	case err == nil:
		n.metrics.Notification("sent")
		n.finish(m)
	case errors.As(err, &refused):
		n.metrics.Notification("refused")
		n.fail(m, err.Error())
	case m.attempt+1 >= n.settings.Attempts:
		n.metrics.Notification("failed")
		n.fail(m, fmt.Sprintf("not delivered after %d attempts: %v", n.settings.Attempts, err))
	default:
		n.metrics.Notification("retried")
		m.attempt++
		m.notBefore = n.clock.Now().Add(min(time.Second<<(m.attempt-1), maxNotifyBackoff))
		n.mu.Lock()
		n.queue = append(n.queue, m)
		n.mu.Unlock()
		n.poke()
	}
}

func (n *Notifier) finish(m *notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.perNS[m.policy.Namespace]--; n.perNS[m.policy.Namespace] <= 0 {
		delete(n.perNS, m.policy.Namespace)
	}
}

func (n *Notifier) fail(m *notification, why string) {
	n.finish(m)
	rbp := &autorebootv1alpha1.RebootPolicy{}
	rbp.Namespace, rbp.Name, rbp.UID = m.policy.Namespace, m.policy.Name, m.uid
	n.events.Warning(rbp, nil, autorebootv1alpha1.EventNotificationFailed, "Notify", "webhook notification: %s", why)
	n.log.V(1).Info("notification not delivered", "rebootpolicy", m.policy.String(), "why", why)
}
