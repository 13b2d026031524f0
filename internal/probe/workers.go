package probe

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Workers runs one probe worker per (RebootPolicy, policy). It is a manager
// Runnable that runs only in the elected leader; reconciles declare the set
// of workers with Ensure and Remove and never wait for a probe. Workers
// report transitions on Events, a source for the controller.
type Workers struct {
	clock   clock.Clock
	probers Factory
	metrics Metrics
	log     logr.Logger
	events  chan event.TypedGenericEvent[types.NamespacedName]

	mu      sync.Mutex
	ctx     context.Context // set by Start; nil before
	wg      sync.WaitGroup
	workers map[WorkerKey]*worker
	byObj   map[types.NamespacedName]map[string]*worker
	// byNS indexes the objects that have workers by namespace.
	byNS map[string]map[types.NamespacedName]struct{}
	// phases counts the workers started per period, for their start
	// offsets (see phaseOffset).
	phases map[time.Duration]uint64
}

var _ manager.LeaderElectionRunnable = &Workers{}

// NewWorkers builds the worker set. Nothing runs until the manager starts it.
func NewWorkers(clk clock.Clock, probers Factory, metrics Metrics, log logr.Logger) *Workers {
	return &Workers{
		clock:   clk,
		probers: probers,
		metrics: metrics,
		log:     log,
		events:  make(chan event.TypedGenericEvent[types.NamespacedName], 1024),
		workers: map[WorkerKey]*worker{},
		byObj:   map[types.NamespacedName]map[string]*worker{},
		byNS:    map[string]map[types.NamespacedName]struct{}{},
		phases:  map[time.Duration]uint64{},
	}
}

// Events delivers the RebootPolicy whose worker published a transition.
func (w *Workers) Events() <-chan event.TypedGenericEvent[types.NamespacedName] { return w.events }

// NeedLeaderElection: probing and restarting are the leader's job.
func (w *Workers) NeedLeaderElection() bool { return true }

// Start runs the workers declared so far and those declared later, until
// ctx ends; then it stops them all and waits for them.
func (w *Workers) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for _, wk := range w.workers {
		w.launch(wk)
	}
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	for _, wk := range w.workers {
		// A worker declared before a Start whose context had already ended
		// was never launched.
		if wk.cancel != nil {
			wk.cancel()
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}

// Ensure makes the workers of obj exactly specs: new ones start, ones whose
// hash changed restart with the new spec, others keep running untouched.
func (w *Workers) Ensure(obj types.NamespacedName, specs []WorkerSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ensureLocked(obj, specs)
}

func (w *Workers) ensureLocked(obj types.NamespacedName, specs []WorkerSpec) {
	current := w.byObj[obj]
	keep := make(map[string]bool, len(specs))
	for _, s := range specs {
		keep[s.Key.Policy] = true
		if old, ok := current[s.Key.Policy]; ok {
			if old.spec.Hash == s.Hash {
				continue
			}
			w.stopLocked(old)
		}
		w.startLocked(s)
	}
	for name, wk := range w.byObj[obj] {
		if !keep[name] {
			w.stopLocked(wk)
		}
	}
}

// Remove stops every worker of obj.
func (w *Workers) Remove(obj types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wk := range w.byObj[obj] {
		w.stopLocked(wk)
	}
}

// Admit stops the workers of obj's namespace for which keep is false,
// then makes obj's workers exactly specs (as Ensure), in one step: a
// worker that gives its slot to another is never seen running beside it.
// It returns the objects that lost a worker to keep.
func (w *Workers) Admit(obj types.NamespacedName, keep func(obj types.NamespacedName, policy string) bool, specs []WorkerSpec) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	displaced := w.retainLocked(obj.Namespace, keep)
	w.ensureLocked(obj, specs)
	return displaced
}

func (w *Workers) retainLocked(namespace string, keep func(obj types.NamespacedName, policy string) bool) []types.NamespacedName {
	var out []types.NamespacedName
	for obj := range w.byNS[namespace] {
		lost := false
		for name, wk := range w.byObj[obj] {
			if !keep(obj, name) {
				w.stopLocked(wk)
				lost = true
			}
		}
		if lost {
			out = append(out, obj)
		}
	}
	return out
}

// Requeue has the controller reconcile objs, without blocking the caller.
func (w *Workers) Requeue(objs []types.NamespacedName) {
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	if ctx == nil || len(objs) == 0 {
		return
	}
	go func() {
		for _, o := range objs {
			w.notify(ctx, o)
		}
	}()
}

// CountIn is the number of workers of namespace.
func (w *Workers) CountIn(namespace string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for obj := range w.byNS[namespace] {
		n += len(w.byObj[obj])
	}
	return n
}

// Snapshot returns the published state of obj's workers by policy name.
func (w *Workers) Snapshot(obj types.NamespacedName) map[string]WorkerView {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]WorkerView, len(w.byObj[obj]))
	for name, wk := range w.byObj[obj] {
		out[name] = wk.view()
	}
	return out
}

// Ack records that the fire seq of a worker (with the given hash) is in
// status, so it is not reported as unacked again.
func (w *Workers) Ack(obj types.NamespacedName, policy, hash string, seq uint64) {
	w.mu.Lock()
	wk := w.byObj[obj][policy]
	w.mu.Unlock()
	if wk == nil || wk.spec.Hash != hash {
		return
	}
	wk.mu.Lock()
	if seq > wk.ackedSeq {
		wk.ackedSeq = seq
	}
	wk.mu.Unlock()
}

// MarkPending records whether the status just written holds a pending
// fire of obj's policy. While it does (and while a fire is not yet in
// status), a probe that keeps failing does not fire again: the restart
// that is due merges every such fire anyway.
func (w *Workers) MarkPending(obj types.NamespacedName, policy string, pending bool) {
	w.mu.Lock()
	wk := w.byObj[obj][policy]
	w.mu.Unlock()
	if wk == nil {
		return
	}
	wk.mu.Lock()
	wk.restartPending = pending
	wk.mu.Unlock()
}

// Keys lists the running workers as "namespace/name/policy@hash", sorted.
func (w *Workers) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.workers))
	for k, wk := range w.workers {
		out = append(out, k.String()+"@"+wk.spec.Hash)
	}
	sort.Strings(out)
	return out
}

// Len is the number of workers.
func (w *Workers) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.workers)
}
