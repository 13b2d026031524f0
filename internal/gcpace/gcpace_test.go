package gcpace

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		live     uint64
		headroom uint64
		want     int
	}{
		{"not known yet: the cap", 0, 8 * mib, 100},
		{"tiny heap: the cap", 1 * mib, 8 * mib, 100},
		{"headroom equals the heap: 100", 8 * mib, 8 * mib, 100},
		{"a little more than the headroom: rounded up to the next step", 9 * mib, 8 * mib, 90},
		{"10 MiB: 80 gives 8 MiB", 10 * mib, 8 * mib, 80},
		{"12 MiB: 70 gives 8.4 MiB, 60 would give 7.2", 12 * mib, 8 * mib, 70},
		{"16 MiB: the base gives the headroom", 16 * mib, 8 * mib, 50},
		{"large heap: the base", 200 * mib, 8 * mib, 50},
		{"no headroom asked: the base", 4 * mib, 0, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.live, tc.headroom, 50, 100)
			if got != tc.want {
				t.Fatalf("Percent(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.headroom/mib, got, tc.want)
			}
			if tc.live > 0 && got < 100 && uint64(got)*tc.live/100 < tc.headroom && got > 50 {
				t.Fatalf("%d%% of %d MiB is short of the %d MiB headroom", got, tc.live/mib, tc.headroom/mib)
			}
		})
	}
}

func TestPercentNeverBelowTheBaseNorAboveTheCap(t *testing.T) {
	for live := uint64(1); live < 64*mib; live = live*3/2 + 1 {
		if p := Percent(live, 8*mib, 50, 100); p < 50 || p > 100 {
			t.Fatalf("Percent(%d bytes) = %d, outside [50, 100]", live, p)
		}
	}
}

// fakeRuntime stands in for the live heap and debug.SetGCPercent.
type fakeRuntime struct {
	mu   sync.Mutex
	live uint64
	sets []int
}

func (f *fakeRuntime) liveHeap() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

func (f *fakeRuntime) setPercent(p int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, p)
	return 0
}

func (f *fakeRuntime) setLive(b uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live = b
}

func (f *fakeRuntime) setsSoFar() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sets...)
}

// lastSet is the percentage set last (0: none yet).
func (f *fakeRuntime) lastSet() int {
	sets := f.setsSoFar()
	if len(sets) == 0 {
		return 0
	}
	return sets[len(sets)-1]
}

// collectUntil runs collections until cond holds: the pacer adjusts in a
// cleanup, which the runtime runs after a collection, asynchronously.
func collectUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of collections: %s", what)
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // lets the cleanup goroutine run
	}
}

func TestPacerFollowsTheLiveHeapAfterEachCollection(t *testing.T) {
	rt := &fakeRuntime{live: 4 * mib}
	p := newPacer(50, 8*mib, 100, rt.liveHeap, rt.setPercent)
	p.Start()
	t.Cleanup(p.Stop)
	if got := rt.setsSoFar(); len(got) != 1 || got[0] != 100 {
		t.Fatalf("Start set %v, want [100] for a 4 MiB heap", got)
	}

	rt.setLive(32 * mib)
	collectUntil(t, "the pacer did not return to the base for a 32 MiB heap", func() bool { return rt.lastSet() == 50 })

	rt.setLive(10 * mib)
	collectUntil(t, "the pacer did not raise the percentage for a 10 MiB heap", func() bool { return rt.lastSet() == 80 })

	// Collections that find the same heap set nothing again.
	before := len(rt.setsSoFar())
	for range 5 {
		runtime.GC()
	}
	if got := rt.setsSoFar(); len(got) != before {
		t.Fatalf("collections with an unchanged heap set the percentage again: %v", got[before:])
	}
	if got := rt.setsSoFar(); !slices.Equal(got, []int{100, 50, 80}) {
		t.Fatalf("percentages set %v, want [100 50 80]", got)
	}
}

func TestStoppedPacerSetsNothingMore(t *testing.T) {
	rt := &fakeRuntime{live: 4 * mib}
	p := newPacer(50, 8*mib, 100, rt.liveHeap, rt.setPercent)
	p.Start()
	p.Stop()
	rt.setLive(64 * mib)
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := rt.setsSoFar(); !slices.Equal(got, []int{100}) {
		t.Fatalf("a stopped pacer set %v, want only Start's [100]", got)
	}
}

func TestNewReadsTheRuntimesLiveHeap(t *testing.T) {
	runtime.GC()
	if live := readLiveHeap(); live == 0 {
		t.Fatalf("live heap after a collection read as 0: is %s still a runtime metric?", liveHeapMetric)
	}
}
