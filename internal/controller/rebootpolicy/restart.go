package rebootpolicy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/weekly"
)

// progressRecheck is how soon a restart blocked by a running rollout is
// looked at again (target watches usually come first).
const progressRecheck = 10 * time.Second

// restartDecision says what to do with the pending work.
type restartDecision struct {
	// ids are the targets' restart ids (see targetRestartIDs).
	ids map[string]string
	// restart: targets to patch now (before the throttle's say).
	restart []targetInfo
	// skipped: targets that cannot be restarted (paused, OnDelete).
	skipped []targetInfo
	// done: targets already restarted for their pending work (by an
	// earlier reconcile whose status write was lost, or by another policy).
	done []targetInfo
	// waiting counts the targets whose restart waits (settle, window,
	// cooldown, rollout; the throttle adds its own).
	waiting int
	// wait > 0: look again after wait.
	wait       time.Duration
	waitReason string
	// condReason is the Ready reason while waiting (RestartPending,
	// Settling, OutsideRestartWindow, Throttled).
	condReason string
	// nextAt is when a settle delay ends or a window opens (zero: not
	// waiting for either).
	nextAt time.Time
}

// restartRules are the spec's rules for acting on pending work.
type restartRules struct {
	minInterval time.Duration
	settle      time.Duration
	windows     *weekly.Schedule // nil: any time
	// maxConcurrent 0: every target together, once none of them waits
	// for its cooldown or a rollout (storm control); n: up to n at a time,
	// each target on its own.
	maxConcurrent int
}

// decideRestart applies the rules to the targets' pending work. id names
// a target's pending work; done targets count whatever waits.
func decideRestart(targets []targetInfo, work pendingWork, ids map[string]string, now time.Time, rules restartRules) restartDecision {
	d := restartDecision{ids: ids}
	blocked := false
	for _, t := range targets {
		entries := work.forTarget(t.obj.GetName())
		if len(entries) == 0 {
			continue
		}
		id := idFor(ids, t.obj.GetName())
		trig := earliest(entries).Truncate(time.Second)
		switch {
		case t.restartID == id:
			d.done = append(d.done, t)
		case t.paused || t.onDelete:
			d.skipped = append(d.skipped, t)
		// Times have one-second precision (annotation and status): only a
		// restart (by another RebootPolicy) or a creation in a later second
		// surely happened after the trigger. In doubt, restart rather than
		// miss a change.
		case !t.restartedAt.IsZero() && t.restartedAt.Truncate(time.Second).After(trig),
			t.obj.GetCreationTimestamp().Time.Truncate(time.Second).After(trig):
			d.done = append(d.done, t)
		case now.Before(settledAt(entries, rules.settle)):
			at := settledAt(entries, rules.settle)
			d.waitFor(at.Sub(now), "settle delay: the last change was seen less than "+rules.settle.String()+" ago",
				autorebootv1alpha1.ReasonSettling, at)
		case !t.restartedAt.IsZero() && now.Sub(t.restartedAt) < rules.minInterval:
			blocked = true
			d.waitFor(rules.minInterval-now.Sub(t.restartedAt),
				fmt.Sprintf("cooldown: %s %s was restarted at %s", t.kind, t.obj.GetName(), t.restartedAt.Format(time.RFC3339)),
				autorebootv1alpha1.ReasonRestartPending, time.Time{})
		case t.progressing:
			blocked = true
			d.waitFor(progressRecheck, fmt.Sprintf("%s %s is still rolling out", t.kind, t.obj.GetName()),
				autorebootv1alpha1.ReasonRestartPending, time.Time{})
		default:
			d.restart = append(d.restart, t)
		}
	}
	if blocked && rules.maxConcurrent == 0 && len(d.restart) > 0 {
		// Storm control: all targets together, none while one waits.
		d.waiting += len(d.restart)
		d.restart = nil
	}
	d.applyWindows(rules.windows, now)
	return d
}

// waitFor records one waiting target; the shortest wait wins, the first
// reason of that wait is reported.
func (d *restartDecision) waitFor(w time.Duration, reason, cond string, at time.Time) {
	d.waiting++
	if w <= 0 {
		w = time.Second
	}
	if d.wait == 0 || w < d.wait {
		d.wait, d.waitReason, d.condReason = w, reason, cond
	}
	if !at.IsZero() && (d.nextAt.IsZero() || at.Before(d.nextAt)) {
		d.nextAt = at
	}
}

// applyWindows keeps the restarts for the next window opening when no
// window is open.
func (d *restartDecision) applyWindows(ws *weekly.Schedule, now time.Time) {
	if len(d.restart) == 0 {
		return
	}
	w, at, ok := windowWait(ws, now)
	if ok && w == 0 {
		return
	}
	d.waiting += len(d.restart)
	d.restart = nil
	if !ok {
		d.wait, d.waitReason, d.condReason = time.Hour, "no restart window opens within a week", autorebootv1alpha1.ReasonOutsideWindow
		return
	}
	// The window is what the restarts wait for now: its reason wins, the
	// earliest wake-up stays.
	if d.wait == 0 || w < d.wait {
		d.wait = w
	}
	d.waitReason = "outside the restart windows: the next opens at " + at.UTC().Format(time.RFC3339)
	d.condReason = autorebootv1alpha1.ReasonOutsideWindow
	if d.nextAt.IsZero() || at.Before(d.nextAt) {
		d.nextAt = at
	}
}

// restartPatch is the minimal merge patch `kubectl rollout restart` would
// make, with this group's annotation, plus the restart id on the workload
// itself. The resourceVersion the decision was based on is a precondition:
// if the target changed meanwhile (or the cache was stale, e.g. another
// reconcile restarted it already) the apiserver answers Conflict and the
// decision is taken again on fresh data.
func restartPatch(now time.Time, resourceVersion, id string) client.Patch {
	body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}},"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		resourceVersion, autorebootv1alpha1.RestartIDAnnotation, id,
		autorebootv1alpha1.RestartedAtAnnotation, restartStamp(now))
	return client.RawPatch(types.MergePatchType, []byte(body))
}

// restartStamp is the restartedAt value: RFC 3339 with sub-second digits,
// unlike kubectl's whole seconds, so that two restarts within one second
// (e.g. two changes with no cooldown) change the pod template twice and
// roll twice instead of the second being a no-op.
func restartStamp(now time.Time) string {
	return now.UTC().Format(time.RFC3339Nano)
}

// restartTarget patches one workload's pod template and returns the
// restartedAt stamp it set.
func (r *Reconciler) restartTarget(ctx context.Context, t targetInfo, now time.Time, id string) (time.Time, error) {
	if t.kind == autorebootv1alpha1.KindRollout {
		return r.restartRollout(ctx, t, now, id)
	}
	if !t.restartedAt.IsZero() && restartStamp(now) == restartStamp(t.restartedAt) {
		// Same clock reading as the last restart (a coarse clock): the
		// template must still change.
		now = now.Add(time.Nanosecond)
	}
	if err := r.Client.Patch(ctx, t.obj, restartPatch(now, t.obj.GetResourceVersion(), id), client.FieldOwner(FieldManager)); err != nil {
		return now, fmt.Errorf("restart %s %s/%s: %w", t.kind, t.obj.GetNamespace(), t.obj.GetName(), err)
	}
	return now, nil
}
