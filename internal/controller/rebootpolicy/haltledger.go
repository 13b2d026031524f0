package rebootpolicy

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// haltLedger is what the throttle keeps for the health gate, fed by the
// same informer events (and guarded by the throttle's lock): which
// restarts were seen available, which halted restarts no longer hold a
// slot, and when to look at a sequence's deadline again.
type haltLedger struct {
	// available: the restartedAt stamp of the last restart seen rolled
	// out and available, per workload.
	available map[throttleKey]time.Time
	// ended: halted restarts, given up by the throttle; their owner is
	// woken when the workload becomes available (or is restarted again).
	ended map[throttleKey]endedRestart
	// alarms: when a sequence's next progress deadline passes.
	alarms map[types.NamespacedName]time.Time
}

type endedRestart struct {
	owner types.NamespacedName
	stamp time.Time
}

func newHaltLedger() haltLedger {
	return haltLedger{available: map[throttleKey]time.Time{}, ended: map[throttleKey]endedRestart{},
		alarms: map[types.NamespacedName]time.Time{}}
}

func keyOfPolicy(rbp *autorebootv1alpha1.RebootPolicy) types.NamespacedName {
	return client.ObjectKeyFromObject(rbp)
}

// noteRolloutLocked records a workload's rollout for the gate and reports
// whether the restart stamped stamp halted (then it is not in progress).
func (t *Throttle) noteRolloutLocked(k throttleKey, stamp time.Time, complete bool) (halted bool) {
	if complete && !stamp.IsZero() {
		t.halts.available[k] = stamp
	}
	e, ok := t.halts.ended[k]
	if !ok {
		return false
	}
	if complete || !e.stamp.Equal(stamp) {
		delete(t.halts.ended, k)
		t.wakeLocked(e.owner)
		return false
	}
	return true
}

func (t *Throttle) forgetRolloutLocked(k throttleKey) {
	delete(t.halts.available, k)
	if e, ok := t.halts.ended[k]; ok {
		delete(t.halts.ended, k)
		t.wakeLocked(e.owner)
	}
}

// availableSince: the workload k was seen available after the restart
// stamped stamp.
func (t *Throttle) availableSince(k throttleKey, stamp time.Time) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.halts.available[k]
	return ok && !s.Before(stamp)
}

// endHalted: the restart of obj stamped stamp halted rbp's sequence; it
// no longer holds a slot (the manager-wide limit serves others), and is
// not taken for one in progress again.
func (t *Throttle) endHalted(obj client.Object, stamp time.Time, rbp *autorebootv1alpha1.RebootPolicy) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := keyOf(obj)
	if r, ok := t.inflight[k]; ok && !r.stamp.After(stamp) {
		delete(t.inflight, k)
		t.wakeWaitersLocked()
		t.gaugeLocked()
	}
	t.halts.ended[k] = endedRestart{owner: keyOfPolicy(rbp), stamp: stamp}
}

// alarmAt wakes owner at at (zero: never).
func (t *Throttle) alarmAt(owner types.NamespacedName, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if at.IsZero() {
		delete(t.halts.alarms, owner)
		return
	}
	t.halts.alarms[owner] = at
}

// ringAlarmsLocked wakes the owners whose deadline passed.
func (t *Throttle) ringAlarmsLocked(now time.Time) {
	for o, at := range t.halts.alarms {
		if !now.Before(at) {
			delete(t.halts.alarms, o)
			t.wakeLocked(o)
		}
	}
}

func (t *Throttle) rolloutTimeoutOr(d time.Duration) time.Duration {
	if t == nil {
		return d
	}
	return t.rolloutTimeout
}
