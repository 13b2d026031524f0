// Package benchkit holds what the benchmarks in test/bench share: their
// sizes (full by default, smaller through the environment), the one
// SUMMARY line each ends with, the manager's identity on a kwok cluster
// and the apiserver audit log its requests are counted from, and waiting
// on what a watch observes instead of sleeping.
package benchkit

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// reduced records the sizes and windows smaller than the documented ones.
var reduced struct {
	sync.Mutex
	m map[string]string
}

func noteReduced(name string, got, full any) {
	reduced.Lock()
	defer reduced.Unlock()
	if reduced.m == nil {
		reduced.m = map[string]string{}
	}
	reduced.m[name] = fmt.Sprintf("%s=%v (full %v)", strings.ToLower(name), got, full)
}

// Scale is BENCH_SCALE (default 1): every size and window of a benchmark
// is multiplied by it unless set explicitly (see Size and Window), so
// BENCH_SCALE=0.1 is a quick smoke test. Only a run at scale 1 measures
// the documented figures.
func Scale(b testing.TB) float64 {
	b.Helper()
	v := os.Getenv("BENCH_SCALE")
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1 {
		b.Fatalf("BENCH_SCALE=%q: want a number in (0, 1]", v)
	}
	return f
}

// Size is the environment variable BENCH_<name> when set (an explicit
// size), else full scaled by Scale, at least 1.
func Size(b testing.TB, name string, full int) int {
	b.Helper()
	key := "BENCH_" + strings.ToUpper(name)
	if v := os.Getenv(key); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive integer", key, v)
		}
		if n != full {
			noteReduced(name, n, full)
		}
		return n
	}
	n := max(1, int(math.Round(float64(full)*Scale(b))))
	if n != full {
		noteReduced(name, n, full)
	}
	return n
}

// Window is BENCH_<name> when set (a Go duration), else full scaled by
// Scale but never below min: a measuring window shorter than that shows
// nothing.
func Window(b testing.TB, name string, full, minimum time.Duration) time.Duration {
	b.Helper()
	key := "BENCH_" + strings.ToUpper(name)
	if v := os.Getenv(key); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration", key, v)
		}
		if d != full {
			noteReduced(name, d, full)
		}
		return d
	}
	d := max(minimum, time.Duration(float64(full)*Scale(b)))
	if d != full {
		noteReduced(name, d, full)
	}
	return d
}

// Reduced says, for the summary line, which sizes and windows of the run
// are not the documented ones ("" for a full run).
func Reduced() string {
	reduced.Lock()
	defer reduced.Unlock()
	if len(reduced.m) == 0 {
		return ""
	}
	var parts []string
	for _, v := range reduced.m {
		parts = append(parts, v)
	}
	sort.Strings(parts)
	return "REDUCED RUN: " + strings.Join(parts, ", ")
}
