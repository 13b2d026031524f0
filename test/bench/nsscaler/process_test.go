package nsscaler

import (
	"cmp"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// phaseStats is what the manager process used in one phase.
type phaseStats struct {
	// peak is the largest sampled resident set, with its anonymous (heap,
	// stacks) and file-backed (the mapped executable) parts, in MiB.
	peak, peakAnon, peakFile float64
	// peakAfter is when the peak was sampled, from the phase's start.
	peakAfter time.Duration
	// endRSS is the resident set when the phase ended, in MiB.
	endRSS float64
	// cpu is the manager's CPU time (user + system) in the phase.
	cpu time.Duration
	// wall is the phase's length; steal the CPU the hypervisor took from
	// the whole machine meanwhile, so that a slow round says whether its
	// cores were there at all. stealKnown is false when /proc/stat could
	// not tell (no steal column): the summary says so instead of a 0.
	wall, steal time.Duration
	stealKnown  bool
	// machine is the CPU every process of the machine spent in the phase
	// (the apiserver, etcd, this benchmark, the manager).
	machine string
}

// cpuSpent is a reading of every process's CPU time, to say what the
// machine spent its cores on from then on.
type cpuSpent struct {
	at    benchkit.ProcessCPUs
	since time.Time
	err   error
}

func startCPUSpent() cpuSpent {
	at, err := benchkit.CPUByProcess()
	return cpuSpent{at: at, since: time.Now(), err: err}
}

// describe names what each command spent since the reading, most first.
func (c cpuSpent) describe() string { return c.until(startCPUSpent()) }

// until names what each command spent from c to the later reading now.
func (c cpuSpent) until(now cpuSpent) string {
	if err := cmp.Or(c.err, now.err); err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	return benchkit.DescribeCPUSpent(c.at, now.at, now.since.Sub(c.since), runtime.NumCPU())
}

// processSampler polls a process's resident set every 50 ms and keeps, per
// phase, the largest sample and the CPU time the process spent in it.
type processSampler struct {
	pid   int
	mu    sync.Mutex
	cur   string
	order []string
	stats map[string]*phaseStats
	// cpuAt is the process's CPU time when the current phase began.
	cpuAt time.Duration
	// since is when the current phase began, stealAt the machine's steal
	// counter then.
	since   time.Time
	stealAt time.Duration
	// stealOK: stealAt was read (the phase's steal can be known).
	stealOK bool
	// machineAt is every process's CPU time when the current phase began.
	machineAt cpuSpent
	done      chan struct{}
	wg        sync.WaitGroup
}

// sampleProcess starts sampling pid, in phase first.
func sampleProcess(pid int, first string) (*processSampler, error) {
	cpu, err := benchkit.ProcessCPU(pid)
	if err != nil {
		return nil, err
	}
	steal, stealErr := benchkit.MachineSteal()
	m := &processSampler{pid: pid, cur: first, order: []string{first}, stats: map[string]*phaseStats{first: {}},
		cpuAt: cpu, since: time.Now(), stealAt: steal, stealOK: stealErr == nil, machineAt: startCPUSpent(), done: make(chan struct{})}
	m.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
			m.sample()
		}
	})
	return m, nil
}

func (m *processSampler) sample() {
	st, err := benchkit.ProcStatusMiB(m.pid)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.stats[m.cur]; st["VmRSS"] > s.peak {
		s.peak, s.peakAnon, s.peakFile = st["VmRSS"], st["RssAnon"], st["RssFile"]
		s.peakAfter = time.Since(m.since)
	}
}

// phase ends the current phase (its CPU time and resident set are taken
// now) and starts the next.
func (m *processSampler) phase(next string) {
	m.sample()
	cpu, cpuErr := benchkit.ProcessCPU(m.pid)
	st, _ := benchkit.ProcStatusMiB(m.pid)
	steal, stealErr := benchkit.MachineSteal()
	machineAt := startCPUSpent()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats[m.cur]
	s.machine, m.machineAt = m.machineAt.until(machineAt), machineAt
	s.endRSS = st["VmRSS"]
	if cpuErr == nil {
		s.cpu, m.cpuAt = cpu-m.cpuAt, cpu
	}
	s.wall = time.Since(m.since)
	s.stealKnown = stealErr == nil && m.stealOK
	if s.stealKnown {
		s.steal = steal - m.stealAt
	}
	m.stealAt, m.stealOK = steal, stealErr == nil
	m.cur, m.since = next, time.Now()
	m.order = append(m.order, next)
	m.stats[next] = &phaseStats{}
}

// stop ends the last phase and the sampling, and returns every phase's
// figures.
func (m *processSampler) stop() map[string]phaseStats {
	m.phase("")
	close(m.done)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]phaseStats, len(m.stats))
	for k, v := range m.stats {
		out[k] = *v
	}
	return out
}

// describe renders the phases in order: peak (anon, file, when in the
// phase) and CPU each.
func (m *processSampler) describe(stats map[string]phaseStats) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, p := range m.order {
		if p == "" {
			continue
		}
		s := stats[p]
		steal := "unknown (no steal column in /proc/stat)"
		if s.stealKnown {
			steal = benchkit.DescribeSteal(0, s.steal, s.wall)
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (anon %.1f, file %.1f; +%.1fs) MiB %.2f CPU-s, steal %s",
			p, s.peak, s.peakAnon, s.peakFile, s.peakAfter.Seconds(), s.cpu.Seconds(), steal))
	}
	return strings.Join(parts, ", ")
}
