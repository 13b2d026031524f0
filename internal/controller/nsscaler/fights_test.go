package nsscaler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestFightTracker(t *testing.T) {
	p := FightPolicy{Threshold: 3, Window: 10 * time.Minute, Backoff: 5 * time.Minute, MaxBackoff: 15 * time.Minute}
	tr := newFightTracker(p)
	uid := types.UID("w")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	step := func(m int, wantContested bool, wantRetry int) {
		t.Helper()
		retry, contested := tr.scaledUp(uid, at(m))
		if contested != wantContested || (contested && !retry.Equal(at(wantRetry))) {
			t.Fatalf("scale-up at +%dm: contested %v until %s, want %v until +%dm", m, contested, retry, wantContested, wantRetry)
		}
	}
	// One manual scale-up, then another outside the window: re-parked.
	step(0, false, 0)
	step(11, false, 0)
	// Three within ten minutes: a back-off of 5 minutes.
	step(12, false, 0)
	step(13, true, 18)
	if _, _, holding := tr.holding(uid, at(17)); !holding {
		t.Fatal("not holding during the back-off")
	}
	if _, _, holding := tr.holding(uid, at(18)); holding {
		t.Fatal("holding after the back-off")
	}
	// The retry re-parks once; scaled up again at once: 10 minutes, then
	// 15 (the cap).
	step(18, false, 0)
	step(19, true, 29)
	step(29, false, 0)
	step(30, true, 45)
	step(45, false, 0)
	// A truce longer than the window after the retry starts over.
	step(56, false, 0)
	step(57, false, 0)
	step(58, true, 63)

	tr.forget(map[types.UID]struct{}{})
	if _, _, holding := tr.holding(uid, at(59)); holding {
		t.Fatal("a forgotten workload is still held")
	}
}
