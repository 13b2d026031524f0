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
//   - a change of what a reader acts on — readiness (readyReplicas,
//     servers, the Available condition with its count), Degraded, the
//     observed generation, the Service — is written at most
//     coalesceWindow after the reconcile that first saw it;
//   - a change of progress counters only (status.replicas and the reason
//     or message of a Progressing=True condition, e.g. "0 of 2 instances
//     exist" becoming "0 of 2 instances available") is written with the
//     next write of the first kind, or progressInterval after it was
//     first seen if nothing else changes, so a stuck rollout still shows
//     its counts.
//
// A reconcile that holds a status back asks to be requeued when it is due;
// the write then computes the status from fresh data, as any other.
const (
	coalesceWindow   = time.Second
	progressInterval = 30 * time.Second
)

// statusPacer remembers, per Memcached, since when its stored status has
// been behind the computed one.
type statusPacer struct {
	mu     sync.Mutex
	behind map[types.NamespacedName]time.Time
}

func newStatusPacer() *statusPacer {
	return &statusPacer{behind: map[types.NamespacedName]time.Time{}}
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
	since, ok := p.behind[key]
	if !ok {
		since = now
		p.behind[key] = now
	}
	due := since.Add(progressInterval)
	if !sameReadiness(stored, next) {
		due = since.Add(coalesceWindow)
	}
	if wait := due.Sub(now); wait > 0 {
		return wait
	}
	delete(p.behind, key)
	return 0
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

// sameReadiness: a and b differ in progress counters at most (see the
// comment at the top).
func sameReadiness(a, b *cachev1alpha1.MemcachedStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.ReadyReplicas != b.ReadyReplicas ||
		a.Selector != b.Selector || a.ServiceName != b.ServiceName ||
		!slices.Equal(a.Servers, b.Servers) || !equalBoolPtr(a.TLS, b.TLS) || !equalBoolPtr(a.Auth, b.Auth) {
		return false
	}
	return slices.EqualFunc(readinessConditions(a.Conditions), readinessConditions(b.Conditions), func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}

// readinessConditions are the conditions with what is only progress
// wording blanked: the reason and message of Progressing=True.
func readinessConditions(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		if c.Type == cachev1alpha1.ConditionProgressing && c.Status == metav1.ConditionTrue {
			c.Reason, c.Message = "", ""
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y metav1.Condition) int {
		switch {
		case x.Type < y.Type:
			return -1
		case x.Type > y.Type:
			return 1
		}
		return 0
	})
	return out
}

func equalBoolPtr(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
