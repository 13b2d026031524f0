package rebootpolicy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Throttle bounds the restarts in progress: manager-wide
// (--max-concurrent-restarts, shared by every RebootPolicy) and per
// RebootPolicy (spec.rollout.maxConcurrent). A restart is in progress from
// its patch until the target's rollout is over (see rolloutPhase.over:
// rolled out and available again, or stuck), at most rolloutTimeout.
//
// What is in progress is read from the workloads themselves — the
// manager's informers show each target's restartedAt stamp, restart id and
// rollout status — so a new leader knows at once what its predecessor
// left rolling; slots handed out in between (the patch not yet seen) are
// reservations. RebootPolicies waiting for a manager-wide slot queue in
// order of arrival and share free slots round-robin, so one policy with
// many targets cannot starve the others; whoever's slot frees up is woken.
// Pending restarts themselves live in status: the throttle only decides
// when.
type Throttle struct {
	limit          int
	clock          clock.Clock
	rolloutTimeout time.Duration
	// stalls is fed by the same informer events and shared with the
	// restart decision (rolloutStalls), so both see a stall alike.
	stalls *stallTracker

	mu       sync.Mutex
	inflight map[throttleKey]inflightRestart
	reserved map[types.NamespacedName]int
	// queue: owners waiting for a manager-wide slot, oldest first.
	queue  []types.NamespacedName
	wants  map[types.NamespacedName]waiter
	synced func() bool
	// regs are the informer registrations synced reads (guarded by mu; a
	// Rollout informer joins once the kind is served, see argoRollouts).
	regs []toolscache.ResourceEventHandlerRegistration
	// wake: owners to reconcile (drained by Start into events).
	wake    map[types.NamespacedName]struct{}
	signal  chan struct{}
	events  chan event.TypedGenericEvent[types.NamespacedName]
	metrics *Metrics
	// halts is the health gate's ledger (haltledger.go).
	halts haltLedger
}

type throttleKey struct {
	kind      autorebootv1alpha1.TargetKind
	namespace string
	name      string
}

type inflightRestart struct {
	owner types.NamespacedName
	stamp time.Time
}

type waiter struct {
	want int
	seen time.Time
}

// defaultRolloutTimeout bounds how long one restart holds a slot when its
// rollout neither ends nor is recognised as stuck (a workload controller
// that never observes the restart, a Deployment with a huge
// progressDeadlineSeconds). It is a safety net well beyond the deadlines
// that normally end a stuck restart (see rolloutStuck), so that the
// throttle and the restart decision agree on a stuck target.
const defaultRolloutTimeout = time.Hour

// waiterTTL: a waiting RebootPolicy that has not asked again for this long
// (deleted, or its work done another way) loses its place.
const waiterTTL = 3 * progressRecheck

// NewThrottle builds a throttle allowing limit restarts in progress at
// once across all RebootPolicies; 0 means no manager-wide limit (per-policy
// limits still apply). Built in main, bound to the manager by Setup.
func NewThrottle(limit int, clk clock.Clock) *Throttle {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Throttle{
		limit: limit, clock: clk, rolloutTimeout: defaultRolloutTimeout, stalls: newStallTracker(),
		inflight: map[throttleKey]inflightRestart{}, reserved: map[types.NamespacedName]int{},
		wants: map[types.NamespacedName]waiter{}, synced: func() bool { return true },
		wake: map[types.NamespacedName]struct{}{}, signal: make(chan struct{}, 1),
		events: make(chan event.TypedGenericEvent[types.NamespacedName], 256),
		halts:  newHaltLedger(),
	}
}

// rolloutStalls is the stall tracker the restart decision reads (nil
// without a throttle).
func (t *Throttle) rolloutStalls() *stallTracker {
	if t == nil {
		return nil
	}
	return t.stalls
}

// Events delivers the RebootPolicies to reconcile because a slot freed up.
func (t *Throttle) Events() <-chan event.TypedGenericEvent[types.NamespacedName] { return t.events }

// Admit reserves up to want restart slots for owner, at most ownerLimit
// in progress for it (0: no per-policy limit), and returns how many it got.
// Every reservation ends in Started or Cancel.
func (t *Throttle) Admit(owner types.NamespacedName, want, ownerLimit int) int {
	if want <= 0 {
		return 0
	}
	if t == nil {
		return want
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	t.pruneLocked(now)
	capped := want
	if ownerLimit > 0 {
		capped = min(want, ownerLimit-t.ownedLocked(owner))
	}
	if capped <= 0 {
		// Waits for its own rollouts: woken when one of them ends.
		t.dequeueLocked(owner)
		return 0
	}
	if !t.synced() {
		t.enqueueLocked(owner, capped, now)
		return 0
	}
	grant := capped
	if t.limit > 0 {
		t.enqueueLocked(owner, capped, now)
		grant = min(capped, t.shareLocked(owner))
		switch {
		case grant == capped:
			t.dequeueLocked(owner)
		case grant > 0:
			// Served in part: the rest waits behind those who waited.
			t.dequeueLocked(owner)
			t.enqueueLocked(owner, capped-grant, now)
		}
		// Served nothing: it keeps its place.
	}
	t.reserved[owner] += grant
	return grant
}

// Started turns one of owner's reservations into a restart in progress of
// the target, whose template now carries stamp.
func (t *Throttle) Started(owner types.NamespacedName, obj client.Object, stamp time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved[owner] > 0 {
		t.reserved[owner]--
	}
	if t.reserved[owner] == 0 {
		delete(t.reserved, owner)
	}
	t.inflight[keyOf(obj)] = inflightRestart{owner: owner, stamp: stamp}
	t.gaugeLocked()
}

// Cancel gives back n reservations of owner that were not used.
func (t *Throttle) Cancel(owner types.NamespacedName, n int) {
	if n <= 0 || t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved[owner] = max(0, t.reserved[owner]-n)
	if t.reserved[owner] == 0 {
		delete(t.reserved, owner)
	}
	t.wakeWaitersLocked()
}

// Withdraw: owner waits for nothing any more.
func (t *Throttle) Withdraw(owner types.NamespacedName) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.wants[owner]; ok {
		t.dequeueLocked(owner)
		t.wakeWaitersLocked()
	}
}

// InProgress is the number of restarts in progress, manager-wide.
func (t *Throttle) InProgress() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(t.clock.Now())
	return len(t.inflight)
}

// Waiting reports whether owner waits for a manager-wide slot.
func (t *Throttle) Waiting(owner types.NamespacedName) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.wants[owner]
	return ok
}

// ownedLocked counts owner's restarts in progress and reservations.
func (t *Throttle) ownedLocked(owner types.NamespacedName) int {
	n := t.reserved[owner]
	for _, r := range t.inflight {
		if r.owner == owner {
			n++
		}
	}
	return n
}

func (t *Throttle) usedLocked() int {
	n := len(t.inflight)
	for _, r := range t.reserved {
		n += r
	}
	return n
}

// pruneLocked drops restarts that have held their slot for too long and
// waiters that stopped asking.
func (t *Throttle) pruneLocked(now time.Time) {
	t.ringAlarmsLocked(now)
	freed := false
	for k, r := range t.inflight {
		if now.Sub(r.stamp) >= t.rolloutTimeout || t.stalls.stalledSince(k, r.stamp, now) {
			delete(t.inflight, k)
			t.wakeLocked(r.owner)
			freed = true
		}
	}
	for _, o := range append([]types.NamespacedName(nil), t.queue...) {
		if now.Sub(t.wants[o].seen) >= waiterTTL {
			t.dequeueLocked(o)
			freed = true
		}
	}
	if freed {
		t.gaugeLocked()
		t.wakeWaitersLocked()
	}
}

func (t *Throttle) gaugeLocked() {
	t.metrics.setInProgress(len(t.inflight))
}
