package rebootpolicy

import (
	"context"
	"errors"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// observeTargets reads the targets and decides about a pending trigger.
// done: the spec cannot be used (InvalidSpec is set); only a spec change
// helps, so nothing else happens.
func (r *Reconciler) observeTargets(ctx context.Context, p *pass) (done bool, err error) {
	targets, err := r.resolveTargets(ctx, p.rbp, p.now)
	var invalid *status.InvalidSpecError
	if errors.As(err, &invalid) {
		p.setConditions(conditionInput{invalidSpec: invalid.Msg})
		return true, nil
	}
	if notServed, ok := errorIsKindNotServed(err); ok {
		p.setConditions(conditionInput{kindNotServed: notServed.Error()})
		p.recheck = notServed.recheck
		return true, nil
	}
	if err != nil {
		return false, err
	}
	p.targets, p.in = targets, targetConditions(targets)
	rules, err := restartRulesOf(p.rbp)
	if err != nil {
		p.setConditions(conditionInput{invalidSchedule: err.Error()})
		return true, nil
	}
	p.rules = rules
	p.work = pendingFromStatus(p.rbp)
	if p.pending = p.work.any(); p.pending {
		p.decision = decideRestart(targets, p.work, targetRestartIDs(p.rbp), p.now, rules)
		p.in.waiting, p.in.waitingReason = p.decision.waitReason, p.decision.condReason
	}
	r.applyGates(p)
	p.setConditions(p.in)
	return false, nil
}

// restartRulesOf reads the spec's rules for acting on pending work; an
// unknown time zone is an error for the InvalidSchedule condition.
func restartRulesOf(rbp *autorebootv1alpha1.RebootPolicy) (restartRules, error) {
	windows, err := parseRestartSchedule(rbp.Spec.RestartSchedule)
	if err != nil {
		return restartRules{}, err
	}
	rules := restartRules{minInterval: minRestartInterval(rbp), windows: windows}
	if rbp.Spec.SettleDelay != nil {
		rules.settle = rbp.Spec.SettleDelay.Duration
	}
	if ro := rbp.Spec.Rollout; ro != nil && ro.MaxConcurrent != nil {
		rules.maxConcurrent = int(*ro.MaxConcurrent)
	}
	return rules, nil
}

// targetConditions is what the conditions say about the targets.
func targetConditions(targets []targetInfo) conditionInput {
	in := conditionInput{targetsFound: len(targets) > 0}
	for _, t := range targets {
		if t.paused {
			in.paused = append(in.paused, t.obj.GetName())
		}
		if t.onDelete {
			in.onDelete = append(in.onDelete, t.obj.GetName())
		}
		if t.stampInFuture {
			in.futureStamps = append(in.futureStamps, string(t.kind)+" "+t.obj.GetName())
		}
	}
	return in
}
