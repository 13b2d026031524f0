package rebootpolicy

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// shareLocked is owner's part of the free slots when they are dealt
// round-robin, one at a time, in queue order.
func (t *Throttle) shareLocked(owner types.NamespacedName) int {
	free := t.limit - t.usedLocked()
	remaining := make(map[types.NamespacedName]int, len(t.queue))
	for _, o := range t.queue {
		remaining[o] = t.wants[o].want
	}
	share := 0
	for free > 0 {
		dealt := false
		for _, o := range t.queue {
			if free == 0 {
				break
			}
			if remaining[o] > 0 {
				remaining[o]--
				free--
				dealt = true
				if o == owner {
					share++
				}
			}
		}
		if !dealt {
			break
		}
	}
	return share
}

func (t *Throttle) enqueueLocked(owner types.NamespacedName, want int, now time.Time) {
	if _, ok := t.wants[owner]; !ok {
		t.queue = append(t.queue, owner)
	}
	t.wants[owner] = waiter{want: want, seen: now}
}

func (t *Throttle) dequeueLocked(owner types.NamespacedName) {
	if _, ok := t.wants[owner]; !ok {
		return
	}
	delete(t.wants, owner)
	for i, o := range t.queue {
		if o == owner {
			t.queue = append(t.queue[:i:i], t.queue[i+1:]...)
			break
		}
	}
}

// wakeWaitersLocked wakes the waiters the free slots would go to.
func (t *Throttle) wakeWaitersLocked() {
	free := len(t.queue)
	if t.limit > 0 {
		free = t.limit - t.usedLocked()
	}
	for _, o := range t.queue {
		if free <= 0 {
			break
		}
		t.wakeLocked(o)
		free -= t.wants[o].want
	}
}

func (t *Throttle) wakeLocked(owner types.NamespacedName) {
	t.wake[owner] = struct{}{}
	select {
	case t.signal <- struct{}{}:
	default:
	}
}
