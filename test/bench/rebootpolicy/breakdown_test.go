package rebootpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// restartSteps is where one flipped target's change→restart time went,
// from the probe server's arrivals and the apiserver's audit log.
type restartSteps struct {
	name string
	// detect: the flip until the first failing probe request arrived
	// (bounded by the probe period: the probe's phase).
	detect time.Duration
	// toFire: that request until the apiserver received the status write
	// recording the fire; fire: that write's time in the apiserver.
	toFire, fire time.Duration
	// toPatch: the fire's answer until the restart patch was received;
	// patch: the patch's time in the apiserver.
	toPatch, patch time.Duration
	// echo: the patch's answer until the benchmark's watch saw it.
	echo  time.Duration
	total time.Duration
}

// firstFailing is the first request for probe i that arrived after the
// flip (nanoseconds since the server's base), or -1.
func (s *probeServer) firstAfter(i int, flip time.Time) int64 {
	lo := flip.Sub(s.base).Nanoseconds()
	p := &s.probes[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.at {
		if t >= lo {
			return t
		}
	}
	return -1
}

// breakdown splits the change→restart time of each flipped target into
// its steps; a target whose steps cannot all be found is left out.
func (r *sizeRun) breakdown(evs []benchkit.AuditEvent, flip time.Time, flipIdx []int, seenAt map[string]time.Time) []restartSteps {
	var out []restartSteps
	for _, j := range flipIdx {
		name, ns := fmt.Sprintf("w-%d", j), r.nsOf(j)
		seen, ok := seenAt[name]
		if !ok {
			continue
		}
		failed := int64(-1)
		for k := range r.probesOf(j) {
			if t := r.srv.firstAfter(j*r.perRBP+k, flip); t >= 0 && (failed < 0 || t < failed) {
				failed = t
			}
		}
		if failed < 0 {
			continue
		}
		failedAt := r.srv.base.Add(time.Duration(failed))
		fire, patch := firstWrite(evs, "rebootpolicies/status", ns, name, failedAt), firstWrite(evs, "deployments", ns, name, failedAt)
		if fire == nil || patch == nil {
			continue
		}
		out = append(out, restartSteps{
			name:    ns + "/" + name,
			detect:  failedAt.Sub(flip),
			toFire:  fire.RequestReceived.Sub(failedAt),
			fire:    fire.Completed.Sub(fire.RequestReceived.Time),
			toPatch: patch.RequestReceived.Sub(fire.Completed.Time),
			patch:   patch.Completed.Sub(patch.RequestReceived.Time),
			echo:    seen.Sub(patch.Completed.Time),
			total:   seen.Sub(flip),
		})
	}
	return out
}

// firstWrite is the first patch of resource (with subresource) ns/name
// received at or after from.
func firstWrite(evs []benchkit.AuditEvent, resource, ns, name string, from time.Time) *benchkit.AuditEvent {
	for i := range evs {
		e := &evs[i]
		if e.Verb == "patch" && e.Resource() == resource && e.Namespace() == ns && e.Name() == name && !e.RequestReceived.Time.Before(from) {
			return e
		}
	}
	return nil
}

// describeSteps is p50/p99 of each step and the slowest targets' steps.
func describeSteps(steps []restartSteps) string {
	if len(steps) == 0 {
		return "no target's steps found"
	}
	of := func(f func(restartSteps) time.Duration) string {
		ds := make([]time.Duration, len(steps))
		for i, s := range steps {
			ds[i] = f(s)
		}
		return fmt.Sprintf("%s/%s", benchkit.Percentile(ds, 0.5).Round(time.Millisecond), benchkit.Percentile(ds, 0.99).Round(time.Millisecond))
	}
	parts := []string{
		"detect " + of(func(s restartSteps) time.Duration { return s.detect }),
		"to fire " + of(func(s restartSteps) time.Duration { return s.toFire }),
		"fire write " + of(func(s restartSteps) time.Duration { return s.fire }),
		"to patch " + of(func(s restartSteps) time.Duration { return s.toPatch }),
		"patch " + of(func(s restartSteps) time.Duration { return s.patch }),
		"echo " + of(func(s restartSteps) time.Duration { return s.echo }),
	}
	slowest := slices.Clone(steps)
	slices.SortFunc(slowest, func(a, b restartSteps) int { return int(b.total - a.total) })
	var worst []string
	for _, s := range slowest[:min(3, len(slowest))] {
		worst = append(worst, fmt.Sprintf("%s %s = %s+%s+%s+%s+%s+%s", s.name, s.total.Round(time.Millisecond),
			s.detect.Round(time.Millisecond), s.toFire.Round(time.Millisecond), s.fire.Round(time.Millisecond),
			s.toPatch.Round(time.Millisecond), s.patch.Round(time.Millisecond), s.echo.Round(time.Millisecond)))
	}
	return fmt.Sprintf("%d targets, p50/p99 %s; slowest (detect+to fire+fire+to patch+patch+echo): %s",
		len(steps), strings.Join(parts, ", "), strings.Join(worst, "; "))
}
