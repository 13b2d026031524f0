package rebootpolicy

import (
	"cmp"
	"fmt"
	"strings"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// policyNote is an event about a policy's transition, held until a status
// write records the transition (see flushNotes).
type policyNote struct {
	warning              bool
	reason, action, note string
}

// policyNotes are the events of the transitions between the old and new
// status. A policy that fails and fires in one pass gets one event, a
// Triggered warning with the probe's message (folded into the policy's
// Restarted when the pass restarts, see foldRestarts): in a mass failure
// every event is a write competing with the restart patches.
func policyNotes(old, cur *autorebootv1alpha1.RebootPolicy) []policyNote {
	prev := map[string]autorebootv1alpha1.PolicyStatus{}
	for _, ps := range old.Status.Policies {
		prev[ps.Name] = ps
	}
	var out []policyNote
	for _, ps := range cur.Status.Policies {
		was := prev[ps.Name]
		failed := ps.LastResult == autorebootv1alpha1.ResultFailure && was.LastResult != autorebootv1alpha1.ResultFailure
		switch fired := ps.PendingTrigger && !was.PendingTrigger; {
		case fired && failed:
			out = append(out, policyNote{true, autorebootv1alpha1.EventTriggered, "Trigger", fmt.Sprintf("policy %s fired on a failed probe: %s", ps.Name, ps.Message)})
		case fired:
			// lastChange still names the change when the message has moved
			// on (the next observation, before this reconcile, saw none).
			out = append(out, policyNote{false, autorebootv1alpha1.EventTriggered, "Trigger", fmt.Sprintf("policy %s fired: %s", ps.Name, cmp.Or(ps.LastChange, ps.Message))})
		case failed:
			out = append(out, policyNote{true, autorebootv1alpha1.EventProbeFailed, "Probe", fmt.Sprintf("policy %s: %s", ps.Name, ps.Message)})
		}
		if fired := newlyPendingTargets(was.Targets, ps.Targets); len(fired) > 0 {
			out = append(out, policyNote{false, autorebootv1alpha1.EventTriggered, "Trigger", fmt.Sprintf("policy %s fired: %s",
				ps.Name, describeFiredTargets(cur.Spec.Target.Kind, fired))})
		}
		if ps.Reason != was.Reason && (ps.Reason == autorebootv1alpha1.ReasonReferenceNotFound ||
			(ps.Reason == autorebootv1alpha1.ReasonSecretNotUsable && ps.LastResult != autorebootv1alpha1.ResultError)) {
			out = append(out, policyNote{true, autorebootv1alpha1.EventReferenceMissing, "Trigger", fmt.Sprintf("policy %s: %s", ps.Name, ps.Message)})
		}
	}
	return out
}

// flushNotes adds the pass's policy events to its batch and records the
// batch, once, at the end of the reconcile: the transitions once a status
// write of the pass succeeded (a transition whose write failed, a
// conflict, is found and reported again by the retry, not twice), the
// restarts in any case (they happened). The events of a fire are not sent
// while its restart patch is on its way.
func (r *Reconciler) flushNotes(p *pass) {
	if p == nil {
		return
	}
	var notes []policyNote
	if p.written {
		notes = p.notes
	}
	for _, n := range foldRestarts(notes, p.restarts) {
		if n.warning {
			p.events.Warning(p.rbp, nil, n.reason, n.action, "%s", n.note)
		} else {
			p.events.Normal(p.rbp, nil, n.reason, n.action, "%s", n.note)
		}
	}
	p.notes, p.restarts = nil, nil
	r.flushGateNotes(p)
	p.events.Flush()
}

// maxListedRestarts bounds the targets one Restarted event names: an
// event's note is limited to 1 KiB.
const maxListedRestarts = 10

// foldRestarts turns a pass's restarts into one Restarted event on the
// policy, which also tells the fires of the same pass (their Triggered
// events are folded into it): in a mass failure every event is a write
// beside the restart patches, and the restart is what the fire was for.
func foldRestarts(notes []policyNote, restarts []string) []policyNote {
	if len(restarts) == 0 {
		return notes
	}
	listed := restarts[:min(len(restarts), maxListedRestarts)]
	note := "restarted " + strings.Join(listed, ", ")
	if more := len(restarts) - len(listed); more > 0 {
		note += fmt.Sprintf(" and %d more", more)
	}
	var out []policyNote
	var fired []string
	warning := false
	for _, n := range notes {
		if n.reason != autorebootv1alpha1.EventTriggered {
			out = append(out, n)
			continue
		}
		fired = append(fired, n.note)
		warning = warning || n.warning
	}
	if len(fired) > 0 {
		note = strings.Join(fired, "; ") + "; " + note
	}
	return append(out, policyNote{warning, autorebootv1alpha1.EventRestarted, "Restart", note})
}

func newlyPendingTargets(was, cur []autorebootv1alpha1.ReferencedTargetStatus) []autorebootv1alpha1.ReferencedTargetStatus {
	pending := map[string]bool{}
	for _, t := range was {
		pending[t.Name] = t.PendingTrigger
	}
	var out []autorebootv1alpha1.ReferencedTargetStatus
	for _, t := range cur {
		if t.PendingTrigger && !pending[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// describeFiredTargets names the targets that fired with what changed for
// them; targets with the same change (a ConfigMap they all use) are named
// together, the first few groups only.
func describeFiredTargets(kind autorebootv1alpha1.TargetKind, fired []autorebootv1alpha1.ReferencedTargetStatus) string {
	var changes []string
	byChange := map[string][]string{}
	for _, t := range fired {
		c := cmp.Or(t.LastChange, "referenced data changed")
		if _, ok := byChange[c]; !ok {
			changes = append(changes, c)
		}
		byChange[c] = append(byChange[c], t.Name)
	}
	n := min(len(changes), probe.MaxListedObjects)
	parts := make([]string, 0, n+1)
	for _, c := range changes[:n] {
		names := byChange[c]
		listed := names[:min(len(names), maxListedRestarts)]
		who := string(kind) + " " + strings.Join(listed, ", ")
		if more := len(names) - len(listed); more > 0 {
			who += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, who+": "+c)
	}
	if more := len(changes) - n; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more changes", more))
	}
	return strings.Join(parts, "; ")
}
