package benchkit

import (
	"sort"
	"sync"
	"time"
)

// Percentile is the p-quantile (0 ≤ p ≤ 1) of ds, nearest rank below; 0
// for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[int(float64(len(s)-1)*p)]
}

// Median is the middle value of xs (the mean of the two middle ones for
// an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// FirstSeen records when a watch first saw each object in some state.
type FirstSeen struct {
	mu sync.Mutex
	at map[string]time.Time
}

// NewFirstSeen returns an empty record.
func NewFirstSeen() *FirstSeen { return &FirstSeen{at: map[string]time.Time{}} }

// Mark records now for name unless it was seen before.
func (f *FirstSeen) Mark(name string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.at[name]; !ok {
		f.at[name] = now
	}
}

// Last is the latest first sighting (zero when none) and how many there are.
func (f *FirstSeen) Last() (time.Time, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last time.Time
	for _, t := range f.at {
		if t.After(last) {
			last = t
		}
	}
	return last, len(f.at)
}

// Lags returns, for every name both recorded, how long after from's
// sighting this one's came (negative lags count as 0).
func (f *FirstSeen) Lags(from *FirstSeen) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	from.mu.Lock()
	defer from.mu.Unlock()
	var out []time.Duration
	for name, t := range f.at {
		if t0, ok := from.at[name]; ok {
			out = append(out, max(0, t.Sub(t0)))
		}
	}
	return out
}
