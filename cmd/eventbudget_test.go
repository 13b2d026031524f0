package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// --event-qps and --event-burst: a positive pair is a budget whose counter
// is registered; a negative rate lifts the bound; anything else stops the
// manager at start-up rather than silencing every event.
func TestNewEventBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		qps     float64
		burst   int
		wantNil bool
		wantErr string
	}{
		{name: "the defaults", qps: 20, burst: 100},
		{name: "a fractional rate", qps: 0.5, burst: 1},
		{name: "a negative rate: no bound", qps: -1, burst: 100, wantNil: true},
		{name: "a zero rate", qps: 0, burst: 100, wantErr: "both must be positive"},
		{name: "a zero burst", qps: 20, burst: 0, wantErr: "both must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			b, err := newEventBudget(tc.qps, tc.burst, reg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (b == nil) != tc.wantNil {
				t.Fatalf("budget = %v, want nil: %v", b, tc.wantNil)
			}
			if b == nil {
				return
			}
			// A second registration fails: the counter is in reg.
			if err := b.Register(reg); err == nil {
				t.Fatal("the dropped-events counter was not registered")
			}
		})
	}
}
