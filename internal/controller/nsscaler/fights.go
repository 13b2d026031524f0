package nsscaler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// FightPolicy says when the controller stops re-parking a workload that
// someone else keeps scaling up (a GitOps tool resetting replicas, an
// operator owning the workload): after Threshold scale-ups within Window
// it leaves the workload alone for Backoff, doubling for each round the
// fight resumes, up to MaxBackoff. One manual scale-up is re-parked as
// always.
type FightPolicy struct {
	Threshold  int
	Window     time.Duration
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Defaults of FightPolicy (flags --nsscaler-fight-*).
const (
	DefaultFightThreshold  = 3
	DefaultFightWindow     = 10 * time.Minute
	DefaultFightBackoff    = 5 * time.Minute
	DefaultFightMaxBackoff = 2 * time.Hour
)

func (p FightPolicy) withDefaults() FightPolicy {
	if p.Threshold <= 0 {
		p.Threshold = DefaultFightThreshold
	}
	if p.Window <= 0 {
		p.Window = DefaultFightWindow
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultFightBackoff
	}
	if p.MaxBackoff < p.Backoff {
		p.MaxBackoff = max(DefaultFightMaxBackoff, p.Backoff)
	}
	return p
}

// fight is what the controller remembers of one contested workload.
type fight struct {
	// ups are the scale-ups seen within the window.
	ups []time.Time
	// rounds counts the back-offs so far; the next lasts Backoff·2^rounds.
	rounds int
	// retryAt ends the current back-off (zero: none started).
	retryAt time.Time
	// retried: the controller re-parked it once after retryAt.
	retried bool
	// manager is the field manager that scaled it up last.
	manager string
}

// fightTracker remembers, in memory, the scale-ups of parked workloads. It
// is lost on restart (the count starts over: the first scale-ups are
// re-parked again). Entries exist only for workloads that were scaled up,
// and are dropped when a workload stops being a target.
type fightTracker struct {
	policy FightPolicy
	mu     sync.Mutex
	fights map[types.UID]*fight
	// parkedReplicas is spec.parkedReplicas at the last pass (-1: none
	// yet).
	parkedReplicas int32
}

func newFightTracker(p FightPolicy) *fightTracker {
	return &fightTracker{policy: p.withDefaults(), fights: map[types.UID]*fight{}, parkedReplicas: -1}
}

// parkedReplicasChanged remembers spec.parkedReplicas and reports whether
// it differs from the last pass's (or whether this is the first pass): a
// lower count re-parks workloads that ran the old one, and those re-parks
// are not scale-ups by another writer.
func (t *fightTracker) parkedReplicasChanged(n int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := t.parkedReplicas != n
	t.parkedReplicas = n
	return changed
}

// holding reports whether the workload is in a back-off at now, and until
// when.
func (t *fightTracker) holding(uid types.UID, now time.Time) (time.Time, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.fights[uid]
	if !ok || f.retryAt.IsZero() || !now.Before(f.retryAt) {
		return time.Time{}, "", false
	}
	return f.retryAt, f.manager, true
}

// scaledUp records a scale-up of a parked workload at now and says
// whether to re-park it. The Threshold-th scale-up within Window starts a
// back-off (contested, until retryAt). When a back-off has ended, the first
// scale-up seen is the controller's retry: it is re-parked once. If the
// other manager scales it up again within Window of that retry, the next
// back-off starts at once, twice as long. A truce longer than Window after a
// retry forgets the earlier rounds.
func (t *fightTracker) scaledUp(uid types.UID, now time.Time) (retryAt time.Time, contested bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.fights[uid]
	if f == nil {
		f = &fight{}
		t.fights[uid] = f
	}
	if !f.retryAt.IsZero() {
		switch {
		case now.Before(f.retryAt):
			return f.retryAt, true
		case !f.retried:
			f.retried, f.ups = true, nil
			return time.Time{}, false
		case now.Sub(f.retryAt) > t.policy.Window:
			*f = fight{}
		}
	}
	kept := f.ups[:0]
	for _, u := range f.ups {
		if now.Sub(u) < t.policy.Window {
			kept = append(kept, u)
		}
	}
	f.ups = append(kept, now)
	threshold := t.policy.Threshold
	if f.rounds > 0 {
		threshold = 1
	}
	if len(f.ups) < threshold {
		return time.Time{}, false
	}
	backoff := t.policy.Backoff << min(f.rounds, 16)
	if backoff > t.policy.MaxBackoff || backoff <= 0 {
		backoff = t.policy.MaxBackoff
	}
	f.rounds++
	f.ups, f.retried = nil, false
	f.retryAt = now.Add(backoff)
	return f.retryAt, true
}

// blame records who scaled the workload up (for status and events).
func (t *fightTracker) blame(uid types.UID, manager string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f, ok := t.fights[uid]; ok {
		f.manager = manager
	}
}

// forget drops the workloads that are no longer targets (not in keep).
func (t *fightTracker) forget(keep map[types.UID]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.fights {
		if _, ok := keep[uid]; !ok {
			delete(t.fights, uid)
		}
	}
}
