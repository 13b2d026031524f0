package rebootpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// observe updates what is in progress from a workload the informer shows:
// a restart ends when its rollout is done; a restart made before this
// manager started (our stamp and restart id, rollout unfinished) is
// picked up.
func (t *Throttle) observe(obj client.Object) {
	// One view per event: the informers call this for every workload.
	v, isTarget := viewOf(obj)
	k := v.key(obj)
	stamp, id := v.restartStamp(), obj.GetAnnotations()[autorebootv1alpha1.RestartIDAnnotation]
	now := t.clock.Now()
	t.stalls.observe(obj, v, now)
	ph := v.phase(isTarget, obj.GetGeneration(), t.stalls.stalled(obj, v, now))
	done := ph.over()
	t.mu.Lock()
	defer t.mu.Unlock()
	halted := t.noteRolloutLocked(k, stamp, isTarget && ph == rolloutComplete)
	r, ok := t.inflight[k]
	switch {
	case ok && done && !stamp.Before(r.stamp):
		delete(t.inflight, k)
		t.wakeLocked(r.owner)
		t.wakeWaitersLocked()
	case !ok && !done && !halted && id != "" && !stamp.IsZero() && t.clock.Since(stamp) < t.rolloutTimeout:
		owner, _, _ := strings.Cut(id, "/")
		t.inflight[k] = inflightRestart{owner: types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner}, stamp: stamp}
	default:
		return
	}
	t.gaugeLocked()
}

func (t *Throttle) forget(obj client.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := keyOf(obj)
	t.stalls.forget(k)
	t.forgetRolloutLocked(k)
	if r, ok := t.inflight[k]; ok {
		delete(t.inflight, k)
		t.wakeLocked(r.owner)
		t.wakeWaitersLocked()
		t.gaugeLocked()
	}
}

func keyOf(obj client.Object) throttleKey {
	v, _ := viewOf(obj)
	return v.key(obj)
}

// key is the throttle's key of obj, which v views.
func (v workloadView) key(obj client.Object) throttleKey {
	return throttleKey{kind: v.kind, namespace: obj.GetNamespace(), name: obj.GetName()}
}

// bind feeds the throttle from the manager's workload informers (the ones
// the controller watches anyway) and reports through m.
func (t *Throttle) bind(ctx context.Context, informers cache.Informers, m *Metrics) error {
	var regs []toolscache.ResourceEventHandlerRegistration
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("throttle: informer of %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(t.handler())
		if err != nil {
			return fmt.Errorf("throttle: watching %T: %w", obj, err)
		}
		regs = append(regs, reg)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.metrics = m
	t.regs = regs
	t.synced = func() bool {
		for _, r := range t.regs {
			if !r.HasSynced() {
				return false
			}
		}
		return true
	}
	return nil
}

// handler is the informer event handler feeding observe and forget.
func (t *Throttle) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observeAny(obj) },
		UpdateFunc: func(_, obj any) { t.observeAny(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(client.Object); ok {
				t.forget(o)
			}
		},
	}
}

func (t *Throttle) observeAny(obj any) {
	if o, ok := obj.(client.Object); ok {
		t.observe(o)
	}
}

// NeedLeaderElection: only the leader's controller reads the events.
func (t *Throttle) NeedLeaderElection() bool { return true }

// Start delivers wake-ups to the controller and expires restarts that
// held their slot for too long, until ctx ends.
func (t *Throttle) Start(ctx context.Context) error {
	tick := t.clock.NewTimer(time.Second)
	defer tick.Stop()
	wasSynced := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.signal:
		case <-tick.C():
			tick.Reset(time.Second)
			t.mu.Lock()
			t.pruneLocked(t.clock.Now())
			if !wasSynced && t.synced() {
				wasSynced = true
				for _, o := range t.queue {
					t.wakeLocked(o)
				}
			}
			t.mu.Unlock()
		}
		if !t.deliver(ctx) {
			return nil
		}
	}
}

// deliver sends the pending wake-ups; false when ctx ended.
func (t *Throttle) deliver(ctx context.Context) bool {
	t.mu.Lock()
	owners := make([]types.NamespacedName, 0, len(t.wake))
	for o := range t.wake {
		owners = append(owners, o)
	}
	t.wake = map[types.NamespacedName]struct{}{}
	t.mu.Unlock()
	for _, o := range owners {
		select {
		case t.events <- event.TypedGenericEvent[types.NamespacedName]{Object: o}:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
