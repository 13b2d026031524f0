package rebootpolicy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestHaltedRestartLeavesTheThrottleAndWakesItsOwnerOnRecovery: a halted
// restart frees its slot, is not picked up again as in progress by later
// updates of the same rollout, and its owner is woken when the workload
// becomes available; the ledger then remembers it as available.
func TestHaltedRestartLeavesTheThrottleAndWakesItsOwnerOnRecovery(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	seq := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seq"}}
	if got := th.Admit(owner("seq"), 1, 1); got != 1 {
		t.Fatalf("got %d", got)
	}
	stamp := fc.Now()
	d := rolling("d1", "seq", stamp)
	th.Started(owner("seq"), d, stamp)
	th.endHalted(d, stamp, seq)
	if n := th.InProgress(); n != 0 {
		t.Fatalf("a halted restart still holds a slot: %d in progress", n)
	}
	th.observe(d)
	if n := th.InProgress(); n != 0 {
		t.Fatalf("an update of the halted rollout took it for one in progress again: %d", n)
	}
	delete(th.wake, owner("seq"))
	th.observe(rolledOut(d))
	if _, woken := th.wake[owner("seq")]; !woken {
		t.Fatal("the owner of a halted restart was not woken when its target became available")
	}
	if !th.availableSince(keyOf(d), stamp) {
		t.Fatal("the ledger does not remember the restart as available")
	}
	if _, held := th.halts.ended[keyOf(d)]; held {
		t.Fatal("the recovered restart is still held as halted")
	}
}

// TestAlarmWakesTheOwnerAtItsDeadline: an alarm wakes its owner once the
// clock reaches it, and only then.
func TestAlarmWakesTheOwnerAtItsDeadline(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(0, fc)
	th.alarmAt(owner("seq"), fc.Now().Add(time.Minute))
	th.InProgress() // prunes, and rings what is due
	if _, woken := th.wake[owner("seq")]; woken {
		t.Fatal("woken before the deadline")
	}
	fc.Step(time.Minute)
	th.InProgress()
	if _, woken := th.wake[owner("seq")]; !woken {
		t.Fatal("not woken at the deadline")
	}
	if _, left := th.halts.alarms[owner("seq")]; left {
		t.Fatal("a rung alarm stays set")
	}
}
