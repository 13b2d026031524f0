package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxSinceLength bounds what --since is parsed from (a date, a timestamp
// or a duration are all short).
const maxSinceLength = 64

// parseSince reads --since: a duration back from now (Go's form, e.g.
// 36h, or whole days, e.g. 7d), an RFC 3339 timestamp, or a date
// (YYYY-MM-DD, UTC midnight). It must not be in the future.
func parseSince(v string, now time.Time) (time.Time, error) {
	if len(v) > maxSinceLength {
		return time.Time{}, fmt.Errorf("--since: longer than %d characters", maxSinceLength)
	}
	var t time.Time
	switch {
	case strings.HasSuffix(v, "d") && !strings.ContainsAny(v[:len(v)-1], ".:-+hms"):
		n, err := strconv.ParseUint(v[:len(v)-1], 10, 16)
		if err != nil {
			return time.Time{}, fmt.Errorf("--since %q: want a number of days, e.g. 7d", v)
		}
		t = now.AddDate(0, 0, -int(n))
	default:
		if d, err := time.ParseDuration(v); err == nil {
			if d < 0 {
				return time.Time{}, fmt.Errorf("--since %q: a duration back from now must not be negative", v)
			}
			t = now.Add(-d)
			break
		}
		var err error
		if t, err = time.Parse(time.RFC3339, v); err != nil {
			if t, err = time.Parse(time.DateOnly, v); err != nil {
				return time.Time{}, fmt.Errorf("--since %q: want a duration (36h, 7d), an RFC 3339 time or a date (YYYY-MM-DD)", v)
			}
		}
	}
	if t.After(now) {
		return time.Time{}, fmt.Errorf("--since %q: in the future", v)
	}
	return t, nil
}
