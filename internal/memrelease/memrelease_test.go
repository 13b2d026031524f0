package memrelease

import (
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestReleaseAfterQuietBursts(t *testing.T) {
	type step struct {
		burst   bool
		advance time.Duration
		want    int32 // releases so far, after the advance
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"one burst: released once the quiet period passed", []step{
			{burst: true, advance: 9 * time.Second, want: 0},
			{advance: time.Second, want: 1},
			{advance: time.Hour, want: 1},
		}},
		{"a burst during the quiet period postpones the release", []step{
			{burst: true, advance: 6 * time.Second, want: 0},
			{burst: true, advance: 6 * time.Second, want: 0},
			{advance: 4 * time.Second, want: 1},
		}},
		{"at most one release per minimum interval", []step{
			{burst: true, advance: 10 * time.Second, want: 1},
			{burst: true, advance: 10 * time.Second, want: 1},
			{advance: 49 * time.Second, want: 1}, // a minute after the first release
			{advance: time.Second, want: 2},
		}},
		{"after the minimum interval the quiet period rules again", []step{
			{burst: true, advance: 10 * time.Second, want: 1},
			{advance: 2 * time.Minute, want: 1},
			{burst: true, advance: 9 * time.Second, want: 1},
			{advance: time.Second, want: 2},
		}},
		{"no burst, no release", []step{
			{advance: time.Hour, want: 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 29, 0, 59, 50, 0, time.UTC))
			var released atomic.Int32
			r := New(clk, DefaultQuiet, DefaultMinInterval, func() { released.Add(1) })
			for i, s := range tc.steps {
				if s.burst {
					r.Burst()
				}
				clk.Step(s.advance)
				if got := released.Load(); got != s.want {
					t.Fatalf("step %d: %d releases, want %d", i, got, s.want)
				}
			}
		})
	}
}

func TestNilIgnoresBursts(t *testing.T) {
	var none *Releaser
	none.Burst()
}
