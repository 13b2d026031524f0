package rebootpolicy

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// handlePending carries out the restart decision for a pending trigger.
// The trigger stays pending while a target cannot be restarted (paused,
// OnDelete, none found) and is acted on once it can. It returns the
// targets recognised as restarted already.
func (r *Reconciler) handlePending(ctx context.Context, p *pass) (ctrl.Result, []string, error) {
	d := p.decision
	if len(p.targets) == 0 {
		if p.fresh {
			r.Events.Warning(p.rbp, nil, autorebootv1alpha1.EventRestartSkipped, "Restart",
				"trigger fired but no %s matches the target: the restart waits for one", p.rbp.Spec.Target.Kind)
		}
		return ctrl.Result{}, nil, nil
	}
	if p.fresh {
		// Once per trigger: the condition keeps saying it afterwards.
		r.announceSkipped(p.rbp, d.skipped)
	}
	if d.wait > 0 {
		log.FromContext(ctx).V(1).Info("restart deferred", "reason", d.waitReason, "after", d.wait)
		return ctrl.Result{RequeueAfter: d.wait}, nil, nil
	}
	recognised := recogniseDone(&p.rbp.Status, d)
	if res, err := r.restartTargets(ctx, p); err != nil {
		return res, recognised, err
	}
	if len(d.skipped) == 0 {
		clearPending(p.rbp.Status.Policies)
	}
	return ctrl.Result{}, recognised, nil
}

func (r *Reconciler) announceSkipped(rbp *autorebootv1alpha1.RebootPolicy, skipped []targetInfo) {
	for _, t := range skipped {
		why := "is paused"
		if t.onDelete {
			why = "uses the OnDelete update strategy"
		}
		r.Events.Warning(rbp, t.obj, autorebootv1alpha1.EventRestartSkipped, "Restart",
			"%s %s %s: not restarted until that changes", t.kind, t.obj.GetName(), why)
		r.Events.Warning(t.obj, rbp, autorebootv1alpha1.EventRestartSkipped, "Restart",
			"RebootPolicy %s fired but this %s %s", rbp.Name, t.kind, why)
		r.Metrics.restart(string(t.kind), "skipped", 0)
	}
}

// recogniseDone counts, once, the targets restarted for this very trigger
// by a reconcile (maybe of a leader that has died since) whose status
// write was lost.
func recogniseDone(st *autorebootv1alpha1.RebootPolicyStatus, d restartDecision) []string {
	var recognised []string
	for _, t := range d.done {
		if t.restartID == d.id && !t.restartedAt.IsZero() &&
			// Status times have whole seconds, the annotation finer ones.
			(st.LastRestartTime == nil || st.LastRestartTime.Time.Before(t.restartedAt.Truncate(time.Second))) {
			st.RestartCount++
			st.LastRestartTime = &metav1.Time{Time: t.restartedAt}
			recognised = append(recognised, string(t.kind)+"/"+t.obj.GetName())
		}
	}
	return recognised
}

// restartTargets patches every target the decision restarts. The fire is
// already in status (persistFire).
func (r *Reconciler) restartTargets(ctx context.Context, p *pass) (ctrl.Result, error) {
	st, d := &p.rbp.Status, p.decision
	for _, t := range d.restart {
		if err := r.restartTarget(ctx, t, p.now, d.id); err != nil {
			if apierrors.IsConflict(err) {
				// Target changed since it was read: decide again.
				return ctrl.Result{RequeueAfter: staleRetry}, errStaleCache
			}
			r.Events.Warning(p.rbp, t.obj, autorebootv1alpha1.EventRestartFailed, "Restart", "%v", err)
			r.Metrics.restart(string(t.kind), "failed", 0)
			p.in.restartFailed = err.Error()
			// Targets restarted so far carry the restart id; the retry
			// counts them as done.
			return ctrl.Result{}, err
		}
		st.RestartCount++
		st.LastRestartTime = &metav1.Time{Time: p.now}
		r.Metrics.restart(string(t.kind), "restarted", p.now.Sub(p.triggeredAt))
		policies := pendingPolicies(st.Policies)
		r.Events.Normal(p.rbp, t.obj, autorebootv1alpha1.EventRestarted, "Restart", "restarted %s %s (%s)", t.kind, t.obj.GetName(), policies)
		r.Events.Normal(t.obj, p.rbp, autorebootv1alpha1.EventRestarted, "Restart", "restarted by RebootPolicy %s (%s)", p.rbp.Name, policies)
		log.FromContext(ctx).Info("restarted target", "kind", t.kind, "target", t.obj.GetName(), "policies", policies)
	}
	return ctrl.Result{}, nil
}
