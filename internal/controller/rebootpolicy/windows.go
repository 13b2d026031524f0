package rebootpolicy

import (
	"fmt"
	"time"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/internal/weekly"
)

// parseRestartSchedule parses spec.restartSchedule (nil: restarts at any
// time). An unknown time zone, which the CRD cannot check, is an error for
// the InvalidSchedule condition.
func parseRestartSchedule(spec *weeklyv1alpha1.Schedule) (*weekly.Schedule, error) {
	if spec == nil {
		return nil, nil
	}
	s, err := weekly.Parse(*spec)
	if err != nil {
		return nil, fmt.Errorf("restartSchedule.%w", err)
	}
	return s, nil
}

// windowWait says whether a restart may be made at now: zero when there is
// no restart schedule or one of its windows is open, else how long until
// the next opens (and when it is; false if none ever opens).
func windowWait(s *weekly.Schedule, now time.Time) (time.Duration, time.Time, bool) {
	if s == nil || s.Contains(now) {
		return 0, now, true
	}
	next := s.Next(now)
	if next.IsZero() {
		return 0, time.Time{}, false
	}
	return next.Sub(now), next, true
}
