// Package gcpace gives a small heap a minimum of headroom between
// collections.
//
// The manager runs with a GC percentage of 50 because its live heap is
// almost all informer cache: at 20,000 cached Deployments Go's default of
// 100 let a mass park or restore grow the resident set to 1.45 times its
// settled size, past the 1.3 the benchmark allows. But a percentage is a
// share of the live heap, and a manager caching a thousand workloads has
// only a few MiB live: at 50 it collects after every couple of MiB of
// decoded watch events and request buffers, about twice as often as at
// 100, and on a two-core machine whose cores the apiserver saturates during
// the pass that CPU is taken straight from the writes (make bench, two runs
// on one machine: a 1,000-Deployment park cost the manager 0.42 s of CPU at
// 50 and 0.37 s at 100).
//
// A Pacer therefore raises the percentage while the live heap is small, so
// that the heap may grow by at least a fixed headroom before the next
// collection, and returns it to the base as the heap grows: the headroom is
// a few MiB whatever the cache, and a large cache keeps the base
// percentage, and with it its bound on the peak.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// liveHeapMetric is the heap the last collection found reachable.
const liveHeapMetric = "/gc/heap/live:bytes"

// step is the granularity of the percentages a Pacer sets: the live heap
// moves a little at every collection, and a percentage that followed it
// exactly would be set (stopping the world) at almost every one.
const step = 10

// Percent is the GC percentage that lets a heap of live bytes grow by at
// least headroom bytes, and by at least base percent, before the next
// collection, capped at limit percent; in steps of 10 above the base. A
// live heap not known yet (0) gets the cap.
func Percent(live, headroom uint64, base, limit int) int {
	if live == 0 {
		return limit
	}
	// Rounded up, so the headroom is never short of the minimum.
	p := (headroom*100 + live - 1) / live
	p = (p + step - 1) / step * step
	if p > uint64(limit) {
		return limit
	}
	return max(base, int(p))
}

// Pacer sets the GC percentage after every collection from the live heap it
// left. Build it with New and Start it once.
type Pacer struct {
	headroom    uint64
	base, limit int
	live        func() uint64
	set         func(int) int

	mu      sync.Mutex
	current int
	stopped bool
}

// New returns a Pacer for a base percentage, a minimum headroom in bytes
// and a cap on the percentage. It reads the runtime's live heap and sets
// the percentage with debug.SetGCPercent.
func New(base int, headroom uint64, limit int) *Pacer {
	return newPacer(base, headroom, limit, readLiveHeap, debug.SetGCPercent)
}

func newPacer(base int, headroom uint64, limit int, live func() uint64, set func(int) int) *Pacer {
	return &Pacer{headroom: headroom, base: base, limit: max(base, limit), live: live, set: set}
}

// Start sets the percentage for the heap as it is now and then after each
// collection until Stop.
func (p *Pacer) Start() {
	p.adjust()
	p.arm()
}

// Stop ends the adjustments (the percentage stays as last set).
func (p *Pacer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
}

// cycleMarker is allocated for one collection: its cleanup runs once a
// collection found it unreachable. It is larger than the 16 bytes the
// allocator packs together, whose cleanups may never run.
type cycleMarker struct{ _ [32]byte }

// arm plants a marker whose cleanup adjusts the percentage and plants the
// next: the runtime offers no callback at the end of a collection, and
// a marker costs one small allocation per collection.
func (p *Pacer) arm() {
	runtime.AddCleanup(new(cycleMarker), func(p *Pacer) {
		if p.adjust() {
			p.arm()
		}
	}, p)
}

// adjust sets the percentage for the live heap when it changed, and
// reports whether the pacer is still running.
func (p *Pacer) adjust() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	// Setting the percentage briefly stops the world: only on a change.
	if want := Percent(p.live(), p.headroom, p.base, p.limit); want != p.current {
		p.set(want)
		p.current = want
	}
	return true
}

func readLiveHeap() uint64 {
	s := []metrics.Sample{{Name: liveHeapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
