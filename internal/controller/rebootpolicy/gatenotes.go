package rebootpolicy

import (
	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// flushGateNotes announces the gates' transitions of the pass: events
// and webhook messages, once a status write recorded them (a retry after
// a conflict finds them again). A refused annotation is said at once.
func (r *Reconciler) flushGateNotes(p *pass) {
	g, rbp := p.gate, p.rbp
	p.gate = gateNotes{}
	for _, key := range g.invalid {
		p.events.Warning(rbp, nil, autorebootv1alpha1.EventGateRequestInvalid, "Gate",
			"the %s annotation has more than %d characters: ignored", key, autorebootv1alpha1.MaxRestartRequestLength)
	}
	if !p.written {
		return
	}
	if g.resumed {
		p.events.Normal(rbp, nil, autorebootv1alpha1.EventRolloutResumed, "Resume",
			"resumed by %s: the restarts made so far no longer halt the rollout", g.resumedBy)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s: rollout resumed by %s", rbp.Namespace, rbp.Name, g.resumedBy)
	}
	if h := g.halted; h != nil {
		p.events.Warning(rbp, nil, autorebootv1alpha1.EventRolloutHalted, "Halt", "%s", haltMessage(rbp, h))
		r.Notifier.Send(rbp, "RebootPolicy %s/%s halted its rollout at %s %s: %s. Nothing more is restarted until `kubectl runbook resume %s` or %s %s becomes available.",
			rbp.Namespace, rbp.Name, h.Kind, h.Name, h.Message, rbp.Name, h.Kind, h.Name)
		if t := r.haltedTarget(p, h); t != nil {
			p.events.Warning(t.obj, rbp, autorebootv1alpha1.EventRolloutHalted, "Halt",
				"not available after its restart by RebootPolicy %s (%s): that rollout is halted", rbp.Name, h.Message)
		}
	}
	if h := g.recovered; h != nil {
		p.events.Normal(rbp, nil, autorebootv1alpha1.EventRolloutRecovered, "Resume",
			"%s %s became available (or is gone): the rollout goes on", h.Kind, h.Name)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s: %s %s became available (or is gone), the rollout goes on", rbp.Namespace, rbp.Name, h.Kind, h.Name)
	}
	if a := g.approved; a != nil {
		what := "nothing was waiting"
		if len(a.released) > 0 {
			what = "releases the restart of " + listTargets(a.released)
		}
		p.events.Normal(rbp, nil, autorebootv1alpha1.EventApproved, "Approve", "approval %s by %s: %s", a.nonce, a.by, what)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s: approval %s by %s: %s", rbp.Namespace, rbp.Name, a.nonce, a.by, what)
	}
	r.flushAlertNotes(p, g.alerts)
	if len(g.awaiting) > 0 {
		p.events.Normal(rbp, nil, autorebootv1alpha1.EventAwaitingApproval, "Approve",
			"the restart of %s waits for approval (`kubectl runbook approve %s`)", listTargets(g.awaiting), rbp.Name)
		r.Notifier.Send(rbp, "RebootPolicy %s/%s waits for approval to restart %s (%s): `kubectl runbook approve %s`",
			rbp.Namespace, rbp.Name, listTargets(g.awaiting), pendingSources(&rbp.Status, ""), rbp.Name)
	}
}

func (r *Reconciler) haltedTarget(p *pass, h *autorebootv1alpha1.HaltedRestart) *targetInfo {
	for i := range p.targets {
		if p.targets[i].kind == h.Kind && p.targets[i].obj.GetName() == h.Name {
			return &p.targets[i]
		}
	}
	return nil
}
