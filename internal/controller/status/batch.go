package status

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxEventsPerReason bounds the events one reconcile records per reason.
// Each event is an apiserver write: a reconcile that acts on hundreds of
// objects must not queue hundreds of writes behind its own. What is left
// out is counted in one more event.
const MaxEventsPerReason = 16

// Batch collects the events of one reconcile; Flush records them once, at
// its end, after the status write, so that a reader who sees an event finds
// the status that goes with it. Every controller's Reconcile makes one
// (Events.Batch) and defers its Flush. Safe for concurrent use; a nil
// Batch drops what it is given (unit tests that do not look at events).
type Batch struct {
	events  Events
	mu      sync.Mutex
	pending []pendingEvent
}

type pendingEvent struct {
	regarding, related        runtime.Object
	typ, reason, action, note string
}

// Batch starts the event batch of one reconcile.
func (e Events) Batch() *Batch { return &Batch{events: e} }

// Normal adds a Normal event about regarding (related may be nil).
func (b *Batch) Normal(regarding, related runtime.Object, reason, action, note string, args ...any) {
	b.add(regarding, related, corev1.EventTypeNormal, reason, action, note, args...)
}

// Warning adds a Warning event about regarding (related may be nil).
func (b *Batch) Warning(regarding, related runtime.Object, reason, action, note string, args ...any) {
	b.add(regarding, related, corev1.EventTypeWarning, reason, action, note, args...)
}

// add formats the note now: the objects it names may change before Flush.
func (b *Batch) add(regarding, related runtime.Object, typ, reason, action, note string, args ...any) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, pendingEvent{regarding, related, typ, reason, action, fmt.Sprintf(note, args...)})
}

// Len is the number of events waiting for Flush.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Flush records the collected events in the order they were added, at most
// MaxEventsPerReason of each reason; the first one left out of a reason is
// recorded with the count of the others. The batch is empty afterwards.
func (b *Batch) Flush() {
	if b == nil {
		return
	}
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	seen := map[string]int{}
	var firstLeftOut []int
	for i, ev := range pending {
		seen[ev.reason]++
		switch n := seen[ev.reason]; {
		case n <= MaxEventsPerReason:
			b.events.emit(ev.regarding, ev.related, ev.typ, ev.reason, ev.action, "%s", ev.note)
		case n == MaxEventsPerReason+1:
			firstLeftOut = append(firstLeftOut, i)
		}
	}
	for _, i := range firstLeftOut {
		ev := pending[i]
		note := ev.note
		if more := seen[ev.reason] - MaxEventsPerReason - 1; more > 0 {
			note = fmt.Sprintf("%s (and %d more %s events of this reconcile, left out)", note, more, ev.reason)
		}
		b.events.emit(ev.regarding, ev.related, ev.typ, ev.reason, ev.action, "%s", note)
	}
}
