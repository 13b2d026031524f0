package nsscaler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// The schedule the benchmark's NSScaler follows, on the real clock: a
// sleep window opening leadTime after the NSScaler is created and closing
// once the park had parkBudget and the idle window after it.
const (
	leadTime      = 15 * time.Second
	minParkBudget = 10 * time.Second
	// parkBudgetPerRaw: the park may take this many times the raw park
	// before the idle window starts late (the target is 1.15×; the slack
	// is for a run that misses it, so that it still measures the rest).
	parkBudgetPerRaw = 3
	// idleMargin: the idle window ends this long before the window closes,
	// so that no write of the transition itself can fall into it.
	idleMargin = time.Second
)

// window is the benchmark's sleep window, in UTC, and the idle time it
// leaves after the park's budget.
type window struct {
	opens, closes time.Time
	idle          time.Duration
	// gitOps: the GitOps scenario's Deployments with Flux owners.
	gitOps int
}

// newWindow places the window: it opens leadTime from now, on a whole
// second, and stays open for the park's budget and the idle window.
func newWindow(rawPark, idle time.Duration) window {
	opens := time.Now().Add(leadTime).Truncate(time.Second)
	budget := max(minParkBudget, parkBudgetPerRaw*rawPark).Truncate(time.Second)
	return window{opens: opens, closes: opens.Add(budget + idle + idleMargin), idle: idle}
}

// spec is the NSScaler: every bench-* namespace, asleep during the window.
func (w window) spec() scalingv1alpha1.NSScalerSpec {
	return scalingv1alpha1.NSScalerSpec{NamespacePrefix: "bench-", Schedule: &scalingv1alpha1.Schedule{
		Schedule: weeklyv1alpha1.Schedule{TimeZone: "UTC", Windows: []weeklyv1alpha1.Window{{
			Days: w.opens.UTC().Format("Mon"), From: w.opens.UTC().Format("15:04:05"), To: w.closes.UTC().Format("15:04:05"),
		}}},
	}}
}

// scheduleRun is what the manager phases measured.
type scheduleRun struct {
	// park and restore run from the window's opening (closing) until the
	// status reports the transition done.
	park, restore time.Duration
	// parked, idled, restored are the apiserver's writes in each phase,
	// parkReads and restoreReads the other requests of the park and the
	// restore (a relist or a read per workload would show there).
	parked, idled, restored requestCounts
	parkReads, restoreReads requestCounts
	// idleWindow is how long the idle phase lasted (park done → just
	// before the window closes), idleWant how long it was meant to.
	idleWindow, idleWant time.Duration
}

// runSchedule creates the NSScaler with the window and measures the park
// when it opens, the idleness until just before it closes, and the restore
// when it closes.
func runSchedule(ctx context.Context, b *testing.B, sum *benchkit.Summary, c client.Client, cs kubernetes.Interface,
	obs *benchkit.Observer, w window, keys []client.ObjectKey, sampler *processSampler) scheduleRun {
	run := scheduleRun{idleWant: w.idle}
	workloads := len(keys)
	createAwake(ctx, b, sum, c, obs, w)
	before := requests(ctx, b, cs)
	// The park phase of the manager's CPU time and memory begins when the
	// window opens.
	opened := time.AfterFunc(time.Until(w.opens), func() { sampler.phase("park") })
	defer opened.Stop()

	progress, err := obs.Until(ctx, 3*time.Minute, 10*time.Minute, scalerIs(ctx, obs, func(s *scalingv1alpha1.NSScaler) bool {
		return s.Status.Phase == scalingv1alpha1.PhaseAsleep && s.Status.ParkedWorkloads == int32(workloads) && s.Status.Done
	}))
	run.park = time.Since(w.opens)
	if err != nil {
		sum.Target(false, "park: %s after %s", progress, run.park.Round(time.Second))
		sum.Fatalf(b, "park: %v", err)
	}
	sampler.phase("idle")
	afterPark := quiet(ctx, b, sum, cs, countedStatusWrite(ctx, b, sum, cs, before))
	parked := afterPark.since(before)
	run.parked, run.parkReads = parked.writes(), parked.reads()
	if n := countReplicas(ctx, b, c, keys, true); n != workloads {
		sum.Fatalf(b, "status reports every Deployment parked, but only %d/%d are", n, workloads)
	}

	// Measuring idleness is the point of this wait: the manager must write
	// nothing — no workload, no status, no event — until the window closes.
	idleStart := time.Now()
	select {
	case <-time.After(time.Until(w.closes.Add(-idleMargin))):
	case <-ctx.Done():
		sum.Fatalf(b, "%v", ctx.Err())
	}
	idleEnd := requests(ctx, b, cs)
	run.idleWindow = time.Since(idleStart)
	run.idled = idleEnd.since(afterPark).writes()

	sampler.phase("restore")
	progress, err = obs.Until(ctx, 3*time.Minute, 10*time.Minute, scalerIs(ctx, obs, func(s *scalingv1alpha1.NSScaler) bool {
		ready := meta.FindStatusCondition(s.Status.Conditions, scalingv1alpha1.ConditionReady)
		return s.Status.Phase == scalingv1alpha1.PhaseAwake && s.Status.ParkedWorkloads == 0 && s.Status.ParkedNamespaceCount == 0 &&
			ready != nil && ready.Status == metav1.ConditionTrue
	}))
	run.restore = time.Since(w.closes)
	sampler.phase("delete")
	if err != nil {
		sum.Target(false, "restore: %s after %s", progress, run.restore.Round(time.Second))
		sum.Fatalf(b, "restore: %v", err)
	}
	restored := countedStatusWrite(ctx, b, sum, cs, idleEnd).since(idleEnd)
	run.restored, run.restoreReads = restored.writes(), restored.reads()
	if n := countReplicas(ctx, b, c, keys, false); n != workloads {
		sum.Fatalf(b, "the status reports every Deployment restored, but only %d/%d are", n, workloads)
	}
	return run
}

// createAwake creates the NSScaler and waits until its status says it is
// Awake until the window opens — before it opens.
func createAwake(ctx context.Context, b *testing.B, sum *benchkit.Summary, c client.Client, obs *benchkit.Observer, w window) {
	if err := c.Create(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: withGitOps(w.spec(), w.gitOps)}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if progress, err := obs.Until(ctx, time.Minute, time.Minute, scalerIs(ctx, obs, func(s *scalingv1alpha1.NSScaler) bool {
		return s.Status.Phase == scalingv1alpha1.PhaseAwake && s.Status.NextTransition != nil && s.Status.NextTransition.Time.Equal(w.opens)
	})); err != nil {
		sum.Fatalf(b, "the NSScaler did not report Awake until %s: %s: %v", w.opens.Format(time.RFC3339), progress, err)
	}
	if !time.Now().Before(w.opens) {
		sum.Fatalf(b, "the window opened before the NSScaler was reconciled (lead time %s too short)", leadTime)
	}
}

// scalerIs is an Until condition on the benchmark's NSScaler.
func scalerIs(ctx context.Context, obs *benchkit.Observer, done func(*scalingv1alpha1.NSScaler) bool) func() (bool, string, error) {
	return func() (bool, string, error) {
		var s scalingv1alpha1.NSScaler
		if err := obs.Reader().Get(ctx, client.ObjectKey{Name: "bench"}, &s); err != nil {
			return false, "no NSScaler in the cache yet", client.IgnoreNotFound(err)
		}
		next := "none"
		if s.Status.NextTransition != nil {
			next = s.Status.NextTransition.UTC().Format(time.RFC3339)
		}
		return done(&s), fmt.Sprintf("phase %q until %s, %d parked, done=%v", s.Status.Phase, next, s.Status.ParkedWorkloads, s.Status.Done), nil
	}
}

// countedStatusWrite reads the apiserver's counters once they include the
// status write the benchmark just observed: the apiserver counts a request
// after it answered it, so a read right after the watch event may miss
// the write that caused it (and count it in the next phase).
func countedStatusWrite(ctx context.Context, b *testing.B, sum *benchkit.Summary, cs kubernetes.Interface, since requestCounts) requestCounts {
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc := requests(ctx, b, cs)
		if statusWrites(rc.since(since)) > 0 {
			return rc
		}
		if time.Now().After(deadline) {
			sum.Fatalf(b, "the apiserver has not counted the status write the benchmark observed")
		}
		select {
		case <-ctx.Done():
			sum.Fatalf(b, "%v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusWrites counts the writes to NSScaler statuses.
func statusWrites(rc requestCounts) int {
	n := 0
	for k, v := range rc {
		if k == "PATCH nsscalers/status" || k == "PUT nsscalers/status" || k == "APPLY nsscalers/status" {
			n += v
		}
	}
	return n
}

// quiet returns the apiserver's counters once they stopped changing for
// quietFor: the manager's events are sent by an asynchronous sink, and on
// a busy machine the last events of a transition land after its status
// write; they belong to the transition, not to the idle window after it.
func quiet(ctx context.Context, b *testing.B, sum *benchkit.Summary, cs kubernetes.Interface, rc requestCounts) requestCounts {
	const quietFor, limit = 2 * time.Second, 20 * time.Second
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-ctx.Done():
			sum.Fatalf(b, "%v", ctx.Err())
		case <-time.After(quietFor):
		}
		next := requests(ctx, b, cs)
		if total(next.since(rc).writes()) == 0 || time.Now().After(deadline) {
			return next
		}
		rc = next
	}
}
