package rebootpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// progressRecheck is how soon a restart blocked by a running rollout is
// looked at again (target watches usually come first).
const progressRecheck = 10 * time.Second

// restartDecision says what to do with a pending trigger.
type restartDecision struct {
	// id is the pending trigger's restart id (see restartID).
	id string
	// restart: targets to patch now.
	restart []targetInfo
	// skipped: targets that cannot be restarted (paused, OnDelete).
	skipped []targetInfo
	// done: targets already restarted since the trigger (by an earlier
	// reconcile whose status write was lost, or by another policy).
	done []targetInfo
	// wait > 0: keep the trigger pending and look again after wait.
	wait       time.Duration
	waitReason string
}

// decideRestart applies storm control: nothing is restarted while any
// target is within its cooldown or still rolling out; the trigger stays
// pending until then. id is the pending trigger's restart id.
func decideRestart(targets []targetInfo, id string, triggeredAt, now time.Time, minInterval time.Duration) restartDecision {
	d := restartDecision{id: id}
	trig := triggeredAt.Truncate(time.Second)
	for _, t := range targets {
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
		case !t.restartedAt.IsZero() && now.Sub(t.restartedAt) < minInterval:
			if w := minInterval - now.Sub(t.restartedAt); w > d.wait {
				d.wait = w
				d.waitReason = fmt.Sprintf("cooldown: %s %s was restarted at %s", t.kind, t.obj.GetName(), t.restartedAt.Format(time.RFC3339))
			}
		case t.progressing:
			if d.wait == 0 {
				d.wait = progressRecheck
				d.waitReason = fmt.Sprintf("%s %s is still rolling out", t.kind, t.obj.GetName())
			}
		default:
			d.restart = append(d.restart, t)
		}
	}
	if d.wait > 0 {
		d.restart, d.done = nil, nil
	}
	return d
}

// restartID names a pending trigger: the RebootPolicy, and the pending
// policies with their persisted trigger times and fingerprints. It is
// computed from status as written (second-precision times), so a successor
// leader derives the same id and recognises a restart already made for it.
func restartID(rbp *autorebootv1alpha1.RebootPolicy) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n", rbp.UID)
	for _, p := range rbp.Status.Policies {
		if !p.PendingTrigger {
			continue
		}
		var at int64
		if p.LastTriggerTime != nil {
			at = p.LastTriggerTime.Unix()
		}
		_, _ = fmt.Fprintf(h, "%s\n%d\n%s\n", p.Name, at, p.Fingerprint)
	}
	return rbp.Name + "/" + hex.EncodeToString(h.Sum(nil)[:8])
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

// restartTarget patches one workload's pod template.
func (r *Reconciler) restartTarget(ctx context.Context, t targetInfo, now time.Time, id string) error {
	if !t.restartedAt.IsZero() && restartStamp(now) == restartStamp(t.restartedAt) {
		// Same clock reading as the last restart (a coarse clock): the
		// template must still change.
		now = now.Add(time.Nanosecond)
	}
	if err := r.Client.Patch(ctx, t.obj, restartPatch(now, t.obj.GetResourceVersion(), id), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("restart %s %s/%s: %w", t.kind, t.obj.GetNamespace(), t.obj.GetName(), err)
	}
	return nil
}
