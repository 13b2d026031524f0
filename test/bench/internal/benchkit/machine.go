package benchkit

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LoadSampler records the machine's 1-minute load average during a run, so
// that a summary says on what machine and under what load it was measured.
type LoadSampler struct {
	mu              sync.Mutex
	first, max, cur float64
	done            chan struct{}
	wg              sync.WaitGroup
}

// SampleLoad starts sampling /proc/loadavg every 5 s.
func SampleLoad() *LoadSampler {
	l := &LoadSampler{done: make(chan struct{})}
	l.first = loadAvg()
	l.max, l.cur = l.first, l.first
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-t.C:
			}
			v := loadAvg()
			l.mu.Lock()
			l.cur, l.max = v, max(l.max, v)
			l.mu.Unlock()
		}
	}()
	return l
}

// String is "machine: N cores, load average (1 min) at start a, max b, at end c".
func (l *LoadSampler) String() string {
	v := loadAvg()
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("machine: %d cores, load average (1 min) at start %.2f, max %.2f, at end %.2f",
		runtime.NumCPU(), l.first, max(l.max, v), v)
}

// Stop ends the sampling.
func (l *LoadSampler) Stop() {
	close(l.done)
	l.wg.Wait()
}

func loadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
