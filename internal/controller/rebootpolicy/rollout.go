package rebootpolicy

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// rolloutPhase is where a workload's rollout stands. It is the one reading
// of a rollout that the restart decision, the target watch and the
// throttle share, so that they cannot disagree about a state — a stuck
// rollout above all.
type rolloutPhase uint8

const (
	// rolloutComplete: the latest spec is observed, every replica runs the
	// latest template and is available, and no older replica is left.
	rolloutComplete rolloutPhase = iota
	// rolloutRolling: the workload controller is replacing pods (it has
	// not observed the latest spec, or fewer replicas than it wants run
	// the latest template) and has not given up.
	rolloutRolling
	// rolloutFinishing: every replica runs the latest template, but some
	// are not available yet (starting, or crash-looping) or older ones are
	// still being removed.
	rolloutFinishing
	// rolloutStuck: the rollout of the observed spec stopped making
	// progress or waits for a human: a Deployment past its
	// progressDeadlineSeconds, a Degraded or paused Rollout, or a
	// StatefulSet or DaemonSet whose rollout status has not moved for
	// stallDeadline plus its minReadySeconds (they have no deadline of
	// their own; their update halts on a pod that never becomes ready).
	// Waiting will not finish it.
	rolloutStuck
)

// inProgress: a restart now would stack on a rollout that is still
// getting somewhere, so the restart decision waits for it. A stuck
// rollout is not in progress (a probe may restart it), and neither is an
// unavailable or crash-looping workload (that is what probes are for).
func (p rolloutPhase) inProgress() bool { return p == rolloutRolling }

// over: a restart has ended for the throttle. It holds its slot while its
// rollout is in progress and while its replicas are not yet available, so
// that the limit bounds the unavailability restarts cause; a stuck
// rollout has ended like a complete one, since waiting will not end it.
// In a health-gated sequence (halt.go) a stuck restart also halts the
// sequence: it frees its slot, but the next target does not take it.
func (p rolloutPhase) over() bool { return p == rolloutComplete || p == rolloutStuck }

// phase classifies the rollout of the workload v views (generation is the
// object's); stalled: the stall tracker found it standing still for its
// deadline. Anything that is not a target kind has nothing rolling.
func (v workloadView) phase(isTarget bool, generation int64, stalled bool) rolloutPhase {
	switch {
	case !isTarget:
		return rolloutComplete
	case v.observed < generation:
		// A deadline condition is about the generation the controller
		// observed: a restart it has not seen yet is rolling.
		return rolloutRolling
	case v.deadlineExceeded || stalled:
		return rolloutStuck
	case v.restarting:
		// A Rollout replaces its pods for spec.restartAt while paused too.
		return rolloutRolling
	case v.halted:
		return rolloutStuck
	case v.updated < v.wantUpdated():
		return rolloutRolling
	case v.available < v.want || !v.settled:
		return rolloutFinishing
	}
	return rolloutComplete
}

// rolloutPhaseOf is the phase of obj read on its own, without the stall
// tracker (what a predicate comparing two copies can know).
func rolloutPhaseOf(obj client.Object) rolloutPhase {
	v, ok := viewOf(obj)
	return v.phase(ok, obj.GetGeneration(), false)
}

// stallDeadline is how long the rollout of a StatefulSet or DaemonSet may
// stand still before it counts as stuck: the default of the Deployment's
// progressDeadlineSeconds, which those kinds lack.
const stallDeadline = 10 * time.Minute

// stallTracker remembers since when the unfinished rollout of each
// StatefulSet and DaemonSet has shown the same status. Fed by the
// throttle's informer handler, which sees every update of every workload;
// a manager that starts counts from its first sight of a rollout, so after
// a restart of the manager a stall is recognised one deadline later at
// most. Only unfinished rollouts are held.
type stallTracker struct {
	mu    sync.Mutex
	marks map[throttleKey]stallMark
}

// stallMark is the rollout status last seen and when it was first seen.
type stallMark struct {
	status   rolloutStatus
	since    time.Time
	deadline time.Duration
}

// rolloutStatus is what moves while a rollout makes progress.
type rolloutStatus struct {
	generation, observed                      int64
	want, replicas, updated, ready, available int32
	settled                                   bool
}

func newStallTracker() *stallTracker {
	return &stallTracker{marks: map[throttleKey]stallMark{}}
}

// stallsByClock: the kinds whose stuck rollouts only time can tell.
func (v workloadView) stallsByClock() bool {
	return v.kind == autorebootv1alpha1.KindStatefulSet || v.kind == autorebootv1alpha1.KindDaemonSet ||
		// A Rollout's progress deadline does not cover its restarts (pod
		// evictions a PodDisruptionBudget may refuse for ever).
		v.kind == autorebootv1alpha1.KindRollout
}

func (v workloadView) status(generation int64) rolloutStatus {
	return rolloutStatus{generation: generation, observed: v.observed, want: v.want, replicas: v.replicas,
		updated: v.updated, ready: v.ready, available: v.available, settled: v.settled}
}

// observe records obj's rollout status at now: a change is progress.
func (s *stallTracker) observe(obj client.Object, v workloadView, now time.Time) {
	if s == nil || !v.stallsByClock() {
		return
	}
	k := v.key(obj)
	st := v.status(obj.GetGeneration())
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.phase(true, obj.GetGeneration(), false) == rolloutComplete || v.onDelete {
		delete(s.marks, k)
		return
	}
	if m, ok := s.marks[k]; ok && m.status == st {
		return
	}
	s.marks[k] = stallMark{status: st, since: now, deadline: stallDeadline + time.Duration(v.minReady)*time.Second}
}

// stalled: obj, as this copy shows it, has stood still for its deadline.
// A copy the tracker has not seen yet is progress, not a stall.
func (s *stallTracker) stalled(obj client.Object, v workloadView, now time.Time) bool {
	if s == nil || !v.stallsByClock() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.marks[v.key(obj)]
	return ok && m.status == v.status(obj.GetGeneration()) && now.Sub(m.since) >= m.deadline
}

// stalledSince: the workload k has stood still for its deadline, in a
// state first seen at or after notBefore (a stall seen before a restart
// says nothing about the restart's rollout).
func (s *stallTracker) stalledSince(k throttleKey, notBefore, now time.Time) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.marks[k]
	return ok && !m.since.Before(notBefore) && now.Sub(m.since) >= m.deadline
}

func (s *stallTracker) forget(k throttleKey) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, k)
}
