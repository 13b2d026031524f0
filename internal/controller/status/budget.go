package status

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// Defaults of the manager's event budget (--event-qps, --event-burst).
// client-go's events.k8s.io broadcaster starts a goroutine for every event
// it is handed, and that goroutine waits for the event sink's own client
// limiter (50 a second, bursts of 100, like the manager's --kube-api-qps):
// handed events faster than the sink writes, the manager only grows. The
// sustained rate is the sink's; the burst is the broadcaster's own queue
// (1,000 events), so that what a large pass reports at once (hundreds of
// objects created together) is kept and a flood costs at most about that
// many goroutines.
const (
	DefaultEventQPS   = 50
	DefaultEventBurst = 1000
)

// dropLogEvery spaces the log lines about dropped events: a flood is one
// line a minute, the metric counts each event.
const dropLogEvery = time.Minute

// EventBudget bounds the events every controller of one manager hands to
// the event recorder, so that however many objects fail at once (tenants'
// RebootPolicies all failing, say) the events in flight stay bounded. It is
// a token bucket; an event over it is dropped, never queued, counted in
// runbook_events_dropped_total and logged at most once a minute. A fifth of
// the burst is kept for Warnings: a flood of Normal events never takes the
// last tokens, so a failure is still reported. Build one in main and pass it
// to every controller; a nil *EventBudget bounds nothing.
type EventBudget struct {
	clock   clock.PassiveClock
	log     logr.Logger
	dropped *prometheus.CounterVec
	// reserve is the tokens only Warnings may take.
	reserve float64

	mu       sync.Mutex
	limiter  *rate.Limiter
	lastLog  time.Time
	unlogged int
}

// NewEventBudget is a budget of qps events a second, bursts of burst (both
// positive), on clk, that logs drops to log.
func NewEventBudget(qps float64, burst int, clk clock.PassiveClock, log logr.Logger) *EventBudget {
	return &EventBudget{
		clock: clk,
		log:   log,
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_events_dropped_total",
			Help: "Events not recorded because the manager's event budget (--event-qps, --event-burst) was spent, by controller and event reason.",
		}, []string{"controller", "reason"}),
		reserve: float64(burst / 5),
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
	}
}

// Register adds the dropped-events counter to reg.
func (b *EventBudget) Register(reg prometheus.Registerer) error {
	return reg.Register(b.dropped)
}

// Recorder is rec, bounded by b, for the controller named controller (the
// metric's label). A nil b returns rec itself.
func (b *EventBudget) Recorder(controller string, rec events.EventRecorder) events.EventRecorder {
	if b == nil || rec == nil {
		return rec
	}
	return &budgetedRecorder{budget: b, controller: controller, next: rec}
}

// allow takes a token for an event of type typ, or counts it dropped.
func (b *EventBudget) allow(controller, typ, reason string) bool {
	now := b.clock.Now()
	b.mu.Lock()
	ok := (typ == corev1.EventTypeWarning || b.limiter.TokensAt(now) >= 1+b.reserve) && b.limiter.AllowN(now, 1)
	var logged int
	if !ok {
		b.unlogged++
		if b.lastLog.IsZero() || now.Sub(b.lastLog) >= dropLogEvery {
			logged, b.unlogged, b.lastLog = b.unlogged, 0, now
		}
	}
	b.mu.Unlock()
	if ok {
		return true
	}
	b.dropped.WithLabelValues(controller, reason).Inc()
	if logged > 0 {
		b.log.Info("events dropped over the manager's event budget (--event-qps, --event-burst); runbook_events_dropped_total counts them",
			"dropped", logged, "controller", controller, "reason", reason)
	}
	return false
}

type budgetedRecorder struct {
	budget     *EventBudget
	controller string
	next       events.EventRecorder
}

// Eventf formats nothing for an event it drops.
func (r *budgetedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.budget.allow(r.controller, eventtype, reason) {
		r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}
