package nsscaler

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// passTiming splits a phase into what comes before the first write, the
// writes, and what comes after the last one: for the manager, its write
// passes read from its log ("workloads written"); for the raw run, the
// parallel writes and the wait for the informer to observe them. It tells
// whether a phase that took longer than raw lost the time in the writes
// (the apiserver's work per write) or around them (the wake-up, the status
// write and its watch event).
type passTiming struct {
	leadIn, writes, tail time.Duration
}

func (p passTiming) String() string {
	return fmt.Sprintf("%s + %s writes + %s", ms(p.leadIn), p.writes.Round(10*time.Millisecond), ms(p.tail))
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// writePass is one "workloads written" line of the manager's log.
type writePass struct {
	end              time.Time
	seconds          float64
	parked, restored int
}

// managerLogTimeFlag makes the manager's log time precise enough to place a
// pass within a phase of a second or so (the default is whole seconds).
const managerLogTimeFlag = "--zap-time-encoding=rfc3339nano"

// writePasses reads the manager's write passes from its JSON log.
func writePasses(logs string) ([]writePass, error) {
	var out []writePass
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"workloads written"`) {
			continue
		}
		var l struct {
			TS       string  `json:"ts"`
			Seconds  float64 `json:"seconds"`
			Parked   int     `json:"parked"`
			Restored int     `json:"restored"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("reading the manager's log line %q: %w", line, err)
		}
		end, err := time.Parse(time.RFC3339Nano, l.TS)
		if err != nil {
			return nil, fmt.Errorf("the manager's log time %q (want %s): %w", l.TS, managerLogTimeFlag, err)
		}
		out = append(out, writePass{end: end, seconds: l.Seconds, parked: l.Parked, restored: l.Restored})
	}
	return out, sc.Err()
}

// phaseOf places the passes that wrote in one direction (parked or
// restored) within the phase from start to end: from the first pass's
// first write to the last pass's end.
func phaseOf(passes []writePass, wrote func(writePass) int, start, end time.Time) (passTiming, bool) {
	var first, last time.Time
	for _, p := range passes {
		if wrote(p) == 0 {
			continue
		}
		begin := p.end.Add(-time.Duration(p.seconds * float64(time.Second)))
		if first.IsZero() || begin.Before(first) {
			first = begin
		}
		if p.end.After(last) {
			last = p.end
		}
	}
	if first.IsZero() {
		return passTiming{}, false
	}
	return passTiming{leadIn: first.Sub(start), writes: last.Sub(first), tail: end.Sub(last)}, true
}

// placePasses places the manager's write passes in its park (from the
// window's opening) and restore (from its closing). A log it cannot read
// is reported, not fatal: the figure explains the times, it judges nothing.
func placePasses(b *testing.B, logs string, w window, run scheduleRun) (park, restore passTiming, ok bool) {
	passes, err := writePasses(logs)
	if err != nil {
		b.Logf("placing the manager's write passes: %v", err)
		return passTiming{}, passTiming{}, false
	}
	park, parkOK := phaseOf(passes, func(p writePass) int { return p.parked }, w.opens, w.opens.Add(run.park))
	restore, restoreOK := phaseOf(passes, func(p writePass) int { return p.restored }, w.closes, w.closes.Add(run.restore))
	return park, restore, parkOK && restoreOK
}

// describePasses is the median split of the manager's phases and of the
// raw runs', and the manager's writes alone against the raw ones' (each
// round against the mean of the raw runs either side).
func describePasses(rounds []round, phase string, mgr func(round) passTiming, raw func(rawRun) passTiming) string {
	var leadIns, writes, tails, rawWrites, rawTails, writeRatios []float64
	for _, r := range rounds {
		if !r.passesOK {
			continue
		}
		m, before, after := mgr(r), raw(r.before), raw(r.after)
		rawW := (before.writes + after.writes).Seconds() / 2
		leadIns = append(leadIns, m.leadIn.Seconds())
		writes = append(writes, m.writes.Seconds())
		tails = append(tails, m.tail.Seconds())
		rawWrites = append(rawWrites, rawW)
		rawTails = append(rawTails, (before.tail+after.tail).Seconds()/2)
		writeRatios = append(writeRatios, m.writes.Seconds()/rawW)
	}
	if len(writeRatios) == 0 {
		return phase + ": no write pass in the manager's log"
	}
	sec := func(xs []float64) time.Duration { return time.Duration(benchkit.Median(xs) * float64(time.Second)) }
	return fmt.Sprintf("%s manager %s, raw %s; writes alone ×%.2f raw (rounds %s)", phase,
		passTiming{leadIn: sec(leadIns), writes: sec(writes), tail: sec(tails)},
		passTiming{writes: sec(rawWrites), tail: sec(rawTails)}, benchkit.Median(writeRatios), ratios(writeRatios))
}
