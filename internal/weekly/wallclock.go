package weekly

import "time"

// A wall time is a reading of a clock on the wall of a time zone: a date
// and a time of day, without an offset. It is represented as a time.Time in
// UTC whose fields are the reading, so that adding a day is calendar
// arithmetic and two readings compare like the clock's digits.
type wallTime = time.Time

// wallOf is the reading of loc's wall clock at instant t.
func wallOf(t time.Time, loc *time.Location) wallTime {
	_, off := t.In(loc).Zone()
	return t.Add(time.Duration(off) * time.Second).UTC()
}

// wallDate is the reading at midnight of the date y-m-d (days beyond the
// month's end roll over, as time.Date does).
func wallDate(y int, m time.Month, d int) wallTime {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// scanSpan bounds the search for the instant of a wall time: no zone has
// shifted its clock by more than a day at once.
const scanSpan = 30 * time.Hour

// Instant is the first instant at which loc's wall clock shows the date
// y-m-d at the time of day tod, or a later reading (see the package
// comment): the jump for a skipped reading, the first occurrence of a
// repeated one. tod may be 24h, the next day's midnight.
func Instant(y int, m time.Month, d int, tod time.Duration, loc *time.Location) time.Time {
	return instantOf(wallDate(y, m, d).Add(tod), loc)
}

// instantOf is Instant for a wall time. Go's time.Date leaves skipped and
// repeated readings unspecified, so the zone's periods are walked instead.
func instantOf(w wallTime, loc *time.Location) time.Time {
	lo, hi := w.Add(-scanSpan), w.Add(scanSpan)
	for t := lo; t.Before(hi); {
		local := t.In(loc)
		start, end := local.ZoneBounds()
		_, off := local.Zone()
		offset := time.Duration(off) * time.Second
		// The period starts past the reading: the clock jumped over it.
		if !start.IsZero() && start.After(lo) && !wallOf(start, loc).Before(w) && wallOf(start.Add(-time.Nanosecond), loc).Before(w) {
			return start
		}
		// The reading occurs in this period.
		if u := w.Add(-offset); !u.Before(t) && (end.IsZero() || u.Before(end)) {
			return u
		}
		if end.IsZero() {
			break
		}
		t = end
	}
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
}
