package benchkit

import (
	"strings"
	"testing"
	"time"
)

func TestParseSteal(t *testing.T) {
	cases := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr string
	}{
		{"aggregate line first", "cpu  311124 0 102380 676080 10687 0 10522 76777 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n", 767770 * time.Millisecond, ""},
		{"per-CPU lines are not the aggregate", "cpu0 1 2 3 4 5 6 7 99 0 0\ncpu  1 0 1 1 0 0 0 250 0 0\n", 2500 * time.Millisecond, ""},
		{"no steal", "cpu  5 0 5 5 0 0 0 0 0 0\n", 0, ""},
		{"too few columns (an old kernel)", "cpu  5 0 5 5 0 0 0\n", 0, "no steal column"},
		{"not a number", "cpu  5 0 5 5 0 0 0 x 0 0\n", 0, "not a tick count"},
		{"no cpu line", "intr 1 2 3\n", 0, "no aggregate cpu line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSteal(tc.stat)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseSteal: got %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseSteal = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestMachineStealNeverDecreases(t *testing.T) {
	a, err := MachineSteal()
	if err != nil {
		t.Fatalf("MachineSteal: %v", err)
	}
	b, err := MachineSteal()
	if err != nil {
		t.Fatalf("MachineSteal: %v", err)
	}
	if a < 0 || b < a {
		t.Fatalf("steal went from %v to %v", a, b)
	}
}

func TestDescribeSteal(t *testing.T) {
	cases := []struct {
		before, after, wall time.Duration
		want                string
	}{
		{time.Second, 1310 * time.Millisecond, 2 * time.Second, "0.31s (0.15 cores)"},
		{time.Second, time.Second, time.Second, "0.00s (0.00 cores)"},
		// A counter that went back (a reset host) reports nothing taken.
		{2 * time.Second, time.Second, time.Second, "0.00s (0.00 cores)"},
	}
	for _, tc := range cases {
		if got := DescribeSteal(tc.before, tc.after, tc.wall); got != tc.want {
			t.Errorf("DescribeSteal(%v, %v, %v) = %q, want %q", tc.before, tc.after, tc.wall, got, tc.want)
		}
	}
}
