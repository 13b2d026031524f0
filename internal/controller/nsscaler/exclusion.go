package nsscaler

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Per-workload exclusions. The annotations are written by whoever may edit
// the workload — a namespace's own team, not a cluster admin — so they are
// read as untrusted input: only exact forms count, anything else is
// reported (InvalidAnnotation) and the workload is parked as if it had no
// annotation.
const (
	// AnnotationExclude: "true" keeps the workload running while its
	// namespace is parked.
	AnnotationExclude = "scaling.runbook.dev/exclude"
	// AnnotationExcludeUntil: an RFC 3339 time until which the workload
	// keeps running; at most maxExcludeAhead ahead.
	AnnotationExcludeUntil = "scaling.runbook.dev/exclude-until"
)

const (
	// maxExcludeAhead bounds exclude-until: a temporary exclusion is meant
	// for days, and a typo (year 3026) must not silently become permanent
	// — a permanent one is written as exclude: "true", where it shows.
	maxExcludeAhead = 31 * 24 * time.Hour
	// maxExclusionValue bounds the values the cache keeps of the
	// exclusion annotations (a valid one is at most 35 bytes).
	maxExclusionValue = 64
	// maxWorkloadLabels bounds the labels the cache keeps per workload; a
	// workload with more cannot be matched by excludeSelector (reported).
	maxWorkloadLabels = 64
)

// labelsTrimmed marks, in the cache only, a workload whose labels were
// dropped because it had more than maxWorkloadLabels.
const labelsTrimmed = "scaling.runbook.dev/internal-labels-trimmed"

// exclusion is what the exclusion rules say about one workload.
type exclusion struct {
	excluded bool
	// until is when a time-bounded exclusion ends (zero otherwise).
	until time.Time
	// validFrom is when an exclude-until too far ahead comes within
	// maxExcludeAhead and starts to count (zero otherwise).
	validFrom time.Time
	// err is a malformed annotation or an unmatchable workload: reported,
	// and the workload is not excluded by it.
	err error
}

// excludedBy evaluates a workload's exclusion at now: the annotation
// exclude: "true", an exclude-until in the future (and within
// maxExcludeAhead), or excludeSelector (nil: none) matching its labels.
func excludedBy(w Workload, selector labels.Selector, now time.Time) exclusion {
	var ex exclusion
	switch w.Exclude {
	case "", "false":
	case "true":
		ex.excluded = true
	default:
		ex.err = fmt.Errorf("annotation %s must be \"true\" or \"false\"", AnnotationExclude)
	}
	if w.ExcludeUntil != "" {
		until, err := time.Parse(time.RFC3339, w.ExcludeUntil)
		switch {
		case err != nil:
			ex.err = fmt.Errorf("annotation %s is not an RFC 3339 time", AnnotationExcludeUntil)
		case until.Sub(now) > maxExcludeAhead:
			ex.err = fmt.Errorf("annotation %s is more than %d days ahead; use %s: \"true\" to exclude for good",
				AnnotationExcludeUntil, maxExcludeAhead/(24*time.Hour), AnnotationExclude)
			ex.validFrom = until.Add(-maxExcludeAhead)
		case until.After(now):
			ex.excluded, ex.until = true, until
		}
	}
	if selector != nil {
		if _, trimmed := w.Labels[labelsTrimmed]; trimmed {
			ex.err = fmt.Errorf("more than %d labels: excludeSelector is not evaluated", maxWorkloadLabels)
		} else if selector.Matches(labels.Set(w.Labels)) {
			ex.excluded = true
		}
	}
	return ex
}

// tenantWakeupGranularity: the instants tenants' annotations make the
// controller reconcile at are rounded up to it, so however many workloads
// carry however many distinct exclude-until times, they cause at most one
// reconcile of an NSScaler per minute.
const tenantWakeupGranularity = time.Minute

// tenantWakeup rounds t up to tenantWakeupGranularity (zero stays zero).
func tenantWakeup(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	r := t.Truncate(tenantWakeupGranularity)
	if r.Before(t) {
		r = r.Add(tenantWakeupGranularity)
	}
	return r
}
