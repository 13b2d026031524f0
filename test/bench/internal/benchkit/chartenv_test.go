package benchkit

import (
	"strconv"
	"testing"
)

// The chart's defaults give the manager a GOMEMLIMIT (its 512Mi limit as
// bytes, what the downward API yields) and leave GOGC at Go's default.
func TestChartRuntimeEnv(t *testing.T) {
	env, err := ChartRuntimeEnv()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(env["GOMEMLIMIT"], 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("GOMEMLIMIT %q, want a plain byte count", env["GOMEMLIMIT"])
	}
	if env["GOGC"] != "" {
		t.Fatalf("GOGC %q, want Go's default", env["GOGC"])
	}
}
