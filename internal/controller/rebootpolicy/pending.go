package rebootpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// handlePending carries out the restart decision about the pending work.
// Work stays pending while a target cannot be restarted (paused, OnDelete,
// none found), waits (settle delay, window, cooldown, rollout) or is held
// back by the throttle, and is acted on once it can. It returns the
// targets recognised as restarted already.
func (r *Reconciler) handlePending(ctx context.Context, p *pass) (ctrl.Result, []string, error) {
	d := p.decision
	nn := client.ObjectKeyFromObject(p.rbp)
	if len(p.targets) == 0 {
		if p.fresh {
			p.events.Warning(p.rbp, nil, autorebootv1alpha1.EventRestartSkipped, "Restart",
				"trigger fired but no %s matches the target: the restart waits for one", p.rbp.Spec.Target.Kind)
			r.Notifier.Send(p.rbp, "RebootPolicy %s/%s fired, but no %s matches its target: the restart waits for one",
				p.rbp.Namespace, p.rbp.Name, p.rbp.Spec.Target.Kind)
		}
		r.recordWaiting(p, 0)
		return ctrl.Result{}, nil, nil
	}
	if p.fresh {
		// Once per trigger: the condition keeps saying it afterwards.
		r.announceSkipped(p, d.skipped)
	}
	recognised := recogniseDone(&p.rbp.Status, d)
	granted, throttled := r.admit(p, nn)
	restarted, res, err := r.restartTargets(ctx, p, granted)
	if err != nil {
		return res, recognised, err
	}
	satisfied := map[string]bool{}
	for _, t := range append(append([]targetInfo(nil), d.done...), restarted...) {
		satisfied[t.obj.GetName()] = true
	}
	clearDone(&p.rbp.Status, satisfied, len(satisfied) == len(p.targets))
	waiting := d.waiting + len(d.skipped) + throttled
	r.recordWaiting(p, waiting)
	if waiting == 0 && !pendingFromStatus(p.rbp).any() {
		r.Throttle.Withdraw(nn)
	}
	wait := d.wait
	if throttled > 0 && (wait == 0 || wait > progressRecheck) {
		// Woken by the throttle when a slot frees; this is the safety net.
		wait = progressRecheck
	}
	if wait > 0 {
		log.FromContext(ctx).V(1).Info("restart deferred", "reason", p.in.waiting, "after", wait)
	}
	return ctrl.Result{RequeueAfter: wait}, recognised, nil
}

// admit asks the throttle for slots for the decision's restarts, in target
// name order, and reports how many were held back.
func (r *Reconciler) admit(p *pass, nn types.NamespacedName) ([]targetInfo, int) {
	want := p.decision.restart
	if len(want) == 0 {
		return nil, 0
	}
	sort.Slice(want, func(i, j int) bool { return want[i].obj.GetName() < want[j].obj.GetName() })
	n := r.Throttle.Admit(nn, len(want), p.rules.maxConcurrent)
	if held := len(want) - n; held > 0 {
		limit := "manager"
		if !r.Throttle.Waiting(nn) {
			limit = "policy"
		}
		r.Metrics.throttledBy(limit)
		p.in.waiting = throttleReason(limit)
		p.in.waitingReason = autorebootv1alpha1.ReasonThrottled
		return want[:n], held
	}
	return want, 0
}

func throttleReason(limit string) string {
	if limit == "policy" {
		return "throttled: spec.rollout.maxConcurrent restarts of this RebootPolicy are rolling out"
	}
	return "throttled: the manager's --max-concurrent-restarts restarts are rolling out"
}

// recordWaiting puts the number of waiting targets and the next time one
// may act into status (and the pending gauge).
func (r *Reconciler) recordWaiting(p *pass, waiting int) {
	st := &p.rbp.Status
	st.PendingRestarts = int32(waiting)
	st.NextRestartTime = nil
	if waiting > 0 && !p.decision.nextAt.IsZero() {
		st.NextRestartTime = &metav1.Time{Time: p.decision.nextAt.Truncate(time.Second)}
	}
	r.Metrics.setPending(client.ObjectKeyFromObject(p.rbp), waiting)
}

func (r *Reconciler) announceSkipped(p *pass, skipped []targetInfo) {
	rbp := p.rbp
	for _, t := range skipped {
		why := "is paused"
		if t.onDelete {
			why = "uses the OnDelete update strategy"
		}
		p.events.Warning(rbp, t.obj, autorebootv1alpha1.EventRestartSkipped, "Restart",
			"%s %s %s: not restarted until that changes", t.kind, t.obj.GetName(), why)
		p.events.Warning(t.obj, rbp, autorebootv1alpha1.EventRestartSkipped, "Restart",
			"RebootPolicy %s fired but this %s %s", rbp.Name, t.kind, why)
		r.Metrics.restart(string(t.kind), "skipped", 0)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s did not restart %s %s: it %s (restarted once that changes)",
			rbp.Namespace, rbp.Name, t.kind, t.obj.GetName(), why)
	}
}

// recogniseDone counts, once, the targets restarted for their pending
// work by a reconcile (maybe of a leader that has died since) whose status
// write was lost. Earliest first, so that each is counted.
func recogniseDone(st *autorebootv1alpha1.RebootPolicyStatus, d restartDecision) []string {
	done := append([]targetInfo(nil), d.done...)
	sort.Slice(done, func(i, j int) bool { return done[i].restartedAt.Before(done[j].restartedAt) })
	var recognised []string
	for _, t := range done {
		if t.restartID == idFor(d.ids, t.obj.GetName()) && !t.restartedAt.IsZero() &&
			// Status times have whole seconds, the annotation finer ones.
			(st.LastRestartTime == nil || st.LastRestartTime.Time.Before(t.restartedAt.Truncate(time.Second))) {
			st.RestartCount++
			st.LastRestartTime = &metav1.Time{Time: t.restartedAt}
			recognised = append(recognised, string(t.kind)+"/"+t.obj.GetName())
		}
	}
	return recognised
}

// restartTargets patches the granted targets. The fire is already in
// status (persistFire). Reservations not used are given back.
func (r *Reconciler) restartTargets(ctx context.Context, p *pass, granted []targetInfo) ([]targetInfo, ctrl.Result, error) {
	st := &p.rbp.Status
	nn := client.ObjectKeyFromObject(p.rbp)
	for i, t := range granted {
		id := idFor(p.decision.ids, t.obj.GetName())
		stamp, err := r.restartTarget(ctx, t, p.now, id)
		if err != nil {
			r.Throttle.Cancel(nn, len(granted)-i)
			if apierrors.IsConflict(err) {
				// Target changed since it was read: decide again.
				return granted[:i], ctrl.Result{RequeueAfter: staleRetry}, errStaleCache
			}
			p.events.Warning(p.rbp, t.obj, autorebootv1alpha1.EventRestartFailed, "Restart", "%v", err)
			r.Metrics.restart(string(t.kind), "failed", 0)
			p.in.restartFailed = err.Error()
			// Targets restarted so far carry the restart id; the retry
			// counts them as done.
			return granted[:i], ctrl.Result{}, err
		}
		r.Throttle.Started(nn, t.obj, stamp)
		st.RestartCount++
		st.LastRestartTime = &metav1.Time{Time: p.now}
		sources := pendingSources(st, t.obj.GetName())
		r.Metrics.restart(string(t.kind), "restarted", p.now.Sub(earliest(p.work.forTarget(t.obj.GetName()))))
		// The policy's Restarted event follows the pass (flushNotes).
		p.restarts = append(p.restarts, fmt.Sprintf("%s %s (%s)", t.kind, t.obj.GetName(), sources))
		p.events.Normal(t.obj, p.rbp, autorebootv1alpha1.EventRestarted, "Restart", "restarted by RebootPolicy %s (%s)", p.rbp.Name, sources)
		r.Notifier.Send(p.rbp, "RebootPolicy %s/%s restarted %s %s (%s)", p.rbp.Namespace, p.rbp.Name, t.kind, t.obj.GetName(), sources)
		log.FromContext(ctx).Info("restarted target", "kind", t.kind, "target", t.obj.GetName(), "policies", sources)
	}
	return granted, ctrl.Result{}, nil
}

// pendingSince reports whether a trigger is pending and since when.
func pendingSince(ps []autorebootv1alpha1.PolicyStatus) (since metav1.Time, pending bool) {
	for _, p := range ps {
		if !p.PendingTrigger {
			continue
		}
		t := metav1.Time{}
		if p.LastTriggerTime != nil {
			t = *p.LastTriggerTime
		}
		if !pending || t.Before(&since) {
			since = t
		}
		pending = true
	}
	return since, pending
}

// pendingSources names what a target's restart is for: the pending
// policies (those of referenced triggers with a pending change of this
// target) and a restart request.
func pendingSources(st *autorebootv1alpha1.RebootPolicyStatus, target string) string {
	type source struct{ name, change string }
	var srcs []source
	for _, p := range st.Policies {
		if p.PendingTrigger {
			srcs = append(srcs, source{p.Name, p.LastChange})
			continue
		}
		for _, t := range p.Targets {
			if t.Name == target && t.PendingTrigger {
				srcs = append(srcs, source{p.Name, t.LastChange})
			}
		}
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].name < srcs[j].name })
	names := make([]string, 0, len(srcs))
	for _, s := range srcs {
		if s.change != "" {
			// What changed, so that the restart says why.
			names = append(names, s.name+" ("+s.change+")")
		} else {
			names = append(names, s.name)
		}
	}
	out := "policies: " + strings.Join(names, ",")
	if st.RestartRequestPending {
		if len(names) == 0 {
			return "restart request " + st.LastRestartRequest
		}
		out += "; restart request " + st.LastRestartRequest
	}
	return out
}
