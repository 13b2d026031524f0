package benchkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Summary collects a benchmark's figures and its targets into the one line
// it ends with:
//
//	SUMMARY <name>: <figure>; <figure> [ok]; <figure> [MISSED] … => PASS|FAIL
//
// Finish logs it and fails the benchmark when a target was missed; deferred
// right after NewSummary it also reports a run that stopped half-way (a
// b.Fatal), with the figures measured until then.
type Summary struct {
	mu       sync.Mutex
	name     string
	figures  []string
	missed   []string
	aborted  string
	finished bool
	load     *LoadSampler
}

// NewSummary starts the summary of the benchmark called name, and samples
// the machine's load until Finish, which reports it last.
func NewSummary(name string) *Summary { return &Summary{name: name, load: SampleLoad()} }

// Figure adds a measured figure without a target.
func (s *Summary) Figure(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.figures = append(s.figures, fmt.Sprintf(format, args...))
}

// Target adds a figure that has a target and whether it held; it returns
// ok.
func (s *Summary) Target(ok bool, format string, args ...any) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := fmt.Sprintf(format, args...)
	if ok {
		s.figures = append(s.figures, f+" [ok]")
	} else {
		s.figures = append(s.figures, f+" [MISSED]")
		s.missed = append(s.missed, f)
	}
	return ok
}

// Fatalf ends the run: the reason goes into the summary line (a run that
// cannot finish missed its targets), then b.Fatalf.
func (s *Summary) Fatalf(b testing.TB, format string, args ...any) {
	b.Helper()
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.aborted = msg
	s.mu.Unlock()
	s.Finish(b)
	b.Fatal(msg)
}

// Finish logs the summary line once and fails b if a target was missed.
// Later calls do nothing, so it can be both deferred and called.
func (s *Summary) Finish(b testing.TB) {
	b.Helper()
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return
	}
	s.finished = true
	s.load.Stop()
	s.figures = append(s.figures, s.load.String())
	pass := len(s.missed) == 0 && s.aborted == "" && !b.Failed()
	var line strings.Builder
	fmt.Fprintf(&line, "SUMMARY %s: %s", s.name, strings.Join(s.figures, "; "))
	if s.aborted != "" {
		fmt.Fprintf(&line, "; ABORTED: %s", s.aborted)
	} else if b.Failed() && len(s.missed) == 0 {
		line.WriteString("; ABORTED (see the error above)")
	}
	if r := Reduced(); r != "" {
		fmt.Fprintf(&line, "; %s", r)
	}
	if pass {
		line.WriteString(" => PASS")
	} else {
		line.WriteString(" => FAIL")
	}
	missed := append([]string(nil), s.missed...)
	s.mu.Unlock()
	b.Log(line.String())
	if len(missed) > 0 {
		b.Errorf("%s: %d target(s) missed: %s", s.name, len(missed), strings.Join(missed, "; "))
	}
}
