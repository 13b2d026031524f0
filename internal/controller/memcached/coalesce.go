package memcached

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Coalescing of status writes. A Memcached on its way to Available passes
// through several statuses in a few seconds (workload applied, instances
// created, some ready, all ready, their endpoints published); writing each
// costs an apiserver write and a watch event for every client of the
// object. The controller writes at once the statuses that settle something
// (the rollout complete with every ready instance listed, a problem, a
// problem that clears), and holds the others back a little, writing the
// latest one then:
//
//   - a change a reader must act on soon — the observed generation, the
//     Service, the selector, TLS or auth, an instance lost (fewer ready, a
//     server gone from servers), a condition turning (but see below) — is
//     written at most coalesceWindow after the reconcile that first saw it;
//   - progress on the way to the settled status — more instances created
//     or ready, servers added, the reason or message of Available and
//     Progressing, and Available=True or Progressing=False while some
//     ready instance is not listed in servers yet (its endpoint is not
//     published: the Service would not reach it) — is written with the
//     next write of the first kind, or progressInterval after it was first
//     seen if nothing else changes, so a slow rollout still shows its
//     counts. Five minutes: half the progress deadline of the owned
//     Deployment (Kubernetes' default of 10 min, which the controller
//     keeps), so a rollout that makes progress, however slowly, shows its
//     counts at least once before it could be called stuck, and a stuck
//     one turns Degraded at that deadline, which is written at once. Less
//     is not enough on a busy cluster: 1,000 Memcacheds created at once on
//     a two-core cluster take four minutes to be Available (the
//     kube-controller-manager's own request rate sets the pace), and with
//     30 s almost half of them wrote a third status on the way, with 2 min
//     a quarter.
//
// So a Memcached created at once writes its first status (Progressing,
// nothing ready) and then its settled one, however the instances become
// ready in between. A reconcile that holds a status back asks to be
// requeued when it is due; the write then computes the status from fresh
// data, as any other.
const (
	coalesceWindow   = time.Second
	progressInterval = 5 * time.Minute
)

// statusPacer remembers, per Memcached, since when its stored status has
// been behind the computed one.
type statusPacer struct {
	mu     sync.Mutex
	behind map[types.NamespacedName]heldSince
}

// heldSince: when the stored status first fell behind, and when it first
// missed a change a reader must act on (zero: not yet).
type heldSince struct {
	first, urgent time.Time
}

func newStatusPacer() *statusPacer {
	return &statusPacer{behind: map[types.NamespacedName]heldSince{}}
}

// hold says how long to hold next back instead of replacing stored with
// it (0: write it now). A nil pacer never holds back (hand-built
// reconcilers in unit tests).
func (p *statusPacer) hold(key types.NamespacedName, stored, next *cachev1alpha1.MemcachedStatus, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if settled(next) || degradedChanged(stored, next) {
		delete(p.behind, key)
		return 0
	}
	h := p.behind[key]
	if h.first.IsZero() {
		h.first = now
	}
	if h.urgent.IsZero() && urgent(stored, next) {
		h.urgent = now
	}
	p.behind[key] = h
	due := h.first.Add(progressInterval)
	if !h.urgent.IsZero() {
		due = minTime(due, h.urgent.Add(coalesceWindow))
	}
	if wait := due.Sub(now); wait > 0 {
		return wait
	}
	delete(p.behind, key)
	return 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// caughtUp: the stored status equals the computed one (or the object is
// gone); nothing is held back any more.
func (p *statusPacer) caughtUp(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.behind, key)
}

// settled: a status that ends a transition — Progressing False (rollout
// complete, parked, blocked, stuck) with every ready instance listed in
// servers — or one reporting a problem. Either is written at once.
func settled(st *cachev1alpha1.MemcachedStatus) bool {
	if conditionIs(st.Conditions, cachev1alpha1.ConditionDegraded, metav1.ConditionTrue) {
		return true
	}
	return conditionIs(st.Conditions, cachev1alpha1.ConditionProgressing, metav1.ConditionFalse) &&
		int(st.ReadyReplicas) == len(st.Servers)
}

// degradedChanged: a problem appeared, cleared or changed in a stored
// status (the first status, which has no condition yet, is coalesced).
func degradedChanged(stored, next *cachev1alpha1.MemcachedStatus) bool {
	b := meta.FindStatusCondition(stored.Conditions, cachev1alpha1.ConditionDegraded)
	a := meta.FindStatusCondition(next.Conditions, cachev1alpha1.ConditionDegraded)
	return b != nil && a != nil && (a.Status != b.Status || a.Reason != b.Reason)
}

func conditionIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	for i := range conds {
		if conds[i].Type == typ {
			return conds[i].Status == status
		}
	}
	return false
}

// urgent: next differs from stored in something a reader must act on
// soon, not only in progress towards the settled status (see the comment
// at the top).
func urgent(stored, next *cachev1alpha1.MemcachedStatus) bool {
	if stored.ObservedGeneration != next.ObservedGeneration || stored.Selector != next.Selector ||
		stored.ServiceName != next.ServiceName || !equalBoolPtr(stored.TLS, next.TLS) || !equalBoolPtr(stored.Auth, next.Auth) {
		return true
	}
	if next.ReadyReplicas < stored.ReadyReplicas || lostServer(stored.Servers, next.Servers) {
		return true
	}
	for _, typ := range []string{cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionProgressing, cachev1alpha1.ConditionDegraded} {
		b := meta.FindStatusCondition(stored.Conditions, typ)
		a := meta.FindStatusCondition(next.Conditions, typ)
		switch {
		case (a == nil) != (b == nil):
			return true
		case a == nil || a.Status == b.Status:
		case reachesGoal(typ, a.Status) && unlisted(next):
			// Ready but not reachable through the Service yet.
		default:
			return true
		}
	}
	return false
}

// reachesGoal: a condition turning to what a finished rollout reports.
func reachesGoal(typ string, to metav1.ConditionStatus) bool {
	return typ == cachev1alpha1.ConditionAvailable && to == metav1.ConditionTrue ||
		typ == cachev1alpha1.ConditionProgressing && to == metav1.ConditionFalse
}

// unlisted: some ready instance is not in servers yet.
func unlisted(st *cachev1alpha1.MemcachedStatus) bool {
	return len(st.Servers) < int(st.ReadyReplicas)
}

// lostServer: a server of before is gone from after.
func lostServer(before, after []string) bool {
	for _, s := range before {
		if !slices.Contains(after, s) {
			return true
		}
	}
	return false
}

func equalBoolPtr(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
