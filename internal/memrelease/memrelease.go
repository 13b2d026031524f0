// Package memrelease hands the heap a burst of work left behind back to the
// operating system once the burst is over.
//
// A park or restore of thousands of workloads allocates request bodies,
// HTTP/2 frames and decoded watch events that are garbage a moment later.
// At idle the Go runtime collects only every two minutes, and its scavenger
// returns a page to the kernel only after the page stayed free through a
// collection, so the manager would keep megabytes it no longer uses mapped
// for minutes after every transition (the resident set that `kubectl top`
// reports and a memory limit counts). One forced collection and scavenge
// once the burst is quiet costs a few tens of milliseconds of CPU per burst.
package memrelease

import (
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// DefaultQuiet leaves room for the watch echo of a burst of writes (the
	// informers decode one event per write after the writes returned).
	DefaultQuiet = 10 * time.Second
	// DefaultMinInterval bounds the forced collections whatever the bursts.
	DefaultMinInterval = time.Minute
)

// Releaser runs its release once no burst was reported for the quiet
// period, and at most once per minimum interval. The zero value is not
// usable; a nil *Releaser ignores bursts.
type Releaser struct {
	clock       clock.WithDelayedExecution
	quiet       time.Duration
	minInterval time.Duration
	release     func()

	mu          sync.Mutex
	timer       clock.Timer
	due         time.Time // of the planned release
	lastRelease time.Time
}

// New returns a Releaser that calls release (nil: debug.FreeOSMemory, a
// collection followed by returning every free page) on clk.
func New(clk clock.WithDelayedExecution, quiet, minInterval time.Duration, release func()) *Releaser {
	if release == nil {
		release = debug.FreeOSMemory
	}
	return &Releaser{clock: clk, quiet: quiet, minInterval: minInterval, release: release}
}

// Burst reports that a burst of work just ended: the release is (re)planned
// for the end of the quiet period that starts now.
func (r *Releaser) Burst() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
	now := r.clock.Now()
	delay := r.quiet
	if !r.lastRelease.IsZero() {
		delay = max(delay, r.lastRelease.Add(r.minInterval).Sub(now))
	}
	r.due = now.Add(delay)
	r.timer = r.clock.AfterFunc(delay, r.fire)
}

// fire reads no clock: a fake clock runs it while holding its own lock.
func (r *Releaser) fire() {
	r.mu.Lock()
	r.timer = nil
	r.lastRelease = r.due
	r.mu.Unlock()
	r.release()
}
