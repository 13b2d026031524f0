package rebootpolicy

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/probe"
)

// ack is a fire to acknowledge once status holds it.
type ack struct {
	policy, hash string
	seq          uint64
}

// alignPolicyStatuses keeps one status per spec policy, in spec order.
func alignPolicyStatuses(policies []autorebootv1alpha1.Policy, old []autorebootv1alpha1.PolicyStatus) []autorebootv1alpha1.PolicyStatus {
	byName := make(map[string]autorebootv1alpha1.PolicyStatus, len(old))
	for _, ps := range old {
		byName[ps.Name] = ps
	}
	out := make([]autorebootv1alpha1.PolicyStatus, 0, len(policies))
	for _, p := range policies {
		ps, ok := byName[p.Name]
		if !ok {
			ps = autorebootv1alpha1.PolicyStatus{Name: p.Name}
		}
		out = append(out, ps)
	}
	return out
}

// suspendPolicyStatuses forgets baselines and pending triggers: changes
// made while suspended are not acted on after resuming.
func suspendPolicyStatuses(ps []autorebootv1alpha1.PolicyStatus) {
	for i := range ps {
		ps[i].Fingerprint, ps[i].TriggerHash = "", ""
		ps[i].PendingTrigger = false
		ps[i].LastChangeTime = nil
		ps[i].Targets = nil
		ps[i].ConsecutiveFailures = 0
		ps[i].LastResult, ps[i].Reason = "", ""
		ps[i].Message = "suspended"
	}
}

// mergeWorkerStates copies the workers' published states into status and
// returns the fires to acknowledge after the status write.
func (r *Reconciler) mergeWorkerStates(rbp *autorebootv1alpha1.RebootPolicy, views map[string]probe.WorkerView, refused map[string]refusal) []ack {
	var acks []ack
	settles := changePolicies(rbp)
	for i := range rbp.Status.Policies {
		ps := &rbp.Status.Policies[i]
		if rf, ok := refused[ps.Name]; ok {
			ps.LastResult = autorebootv1alpha1.ResultError
			ps.Reason = rf.reason
			ps.Message = probe.Truncate(rf.message, 256)
			ps.ConsecutiveFailures = 0
			ps.Fingerprint, ps.TriggerHash = "", ""
			ps.Targets = nil
			continue
		}
		v, ok := views[ps.Name]
		if !ok {
			continue
		}
		s := v.State
		if s.LastResult == "" && s.FireSeq == 0 {
			continue // nothing observed yet: keep what status says
		}
		ps.LastResult, ps.Reason, ps.Message = s.LastResult, s.Reason, s.Message
		ps.ConsecutiveFailures = s.ConsecutiveFailures
		ps.Fingerprint, ps.TriggerHash = s.Fingerprint, s.TriggerHash
		if s.Targets != nil || ps.Targets != nil {
			ps.Targets = mergeTargets(ps.Targets, s.Targets, v.AckedSeq)
		}
		if v.Unacked {
			if s.Targets == nil {
				mergeFire(ps, s.FiredAt, settles[ps.Name], s.Change)
			}
			acks = append(acks, ack{policy: ps.Name, hash: v.Hash, seq: s.FireSeq})
		}
	}
	return acks
}

// mergeFire records a fire of a policy. Fires while a restart is already
// pending merge into it; the first trigger time stays, so a probe failing
// on every period during the cooldown writes nothing. A change trigger's
// fire also moves lastChangeTime, from which the settle delay counts;
// what it changed is added to lastChange (which it replaces when no
// restart was pending).
func mergeFire(ps *autorebootv1alpha1.PolicyStatus, at time.Time, settles bool, change string) {
	if !ps.PendingTrigger {
		ps.PendingTrigger = true
		ps.LastTriggerTime = &metav1.Time{Time: at}
		ps.LastChange = ""
	}
	ps.LastChange = probe.MergeChange(ps.LastChange, change)
	if settles {
		ps.LastChangeTime = &metav1.Time{Time: at}
	}
}

// mergeTargets copies a referenced trigger's per-target baselines into
// status: targets no longer matched are dropped, a target whose fire is
// beyond acked becomes (or stays) pending.
func mergeTargets(old []autorebootv1alpha1.ReferencedTargetStatus, pub map[string]probe.TargetState, acked uint64) []autorebootv1alpha1.ReferencedTargetStatus {
	byName := make(map[string]autorebootv1alpha1.ReferencedTargetStatus, len(old))
	for _, t := range old {
		byName[t.Name] = t
	}
	out := make([]autorebootv1alpha1.ReferencedTargetStatus, 0, len(pub))
	for name, ts := range pub {
		n := byName[name]
		n.Name, n.References, n.Fingerprint = name, ts.References, ts.Fingerprint
		if ts.FireSeq > acked {
			if !n.PendingTrigger {
				n.PendingTrigger = true
				n.LastTriggerTime = &metav1.Time{Time: ts.FiredAt}
				n.LastChange = ""
			}
			n.LastChangeTime = &metav1.Time{Time: ts.FiredAt}
			n.LastChange = probe.MergeChange(n.LastChange, ts.Change)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil
	}
	return out
}

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

// flushNotes emits the pass's policy events at the end of the reconcile:
// the transitions once a status write of the pass succeeded (a transition
// whose write failed, a conflict, is found and reported again by the
// retry, not twice), the restarts in any case (they happened). The events
// of a fire are not sent while its restart patch is on its way.
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
			r.Events.Warning(p.rbp, nil, n.reason, n.action, "%s", n.note)
		} else {
			r.Events.Normal(p.rbp, nil, n.reason, n.action, "%s", n.note)
		}
	}
	p.notes, p.restarts = nil, nil
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

// conditionInput is what the conditions are computed from.
type conditionInput struct {
	suspended    bool
	targetsFound bool
	paused       []string
	onDelete     []string
	waiting      string
	// waitingReason is Ready's reason while waiting (RestartPending when
	// empty).
	waitingReason string
	restartFailed string
	// invalidSpec: the spec cannot be used (e.g. the target selector).
	invalidSpec string
	// invalidSchedule: spec.restartSchedule cannot be evaluated (a time
	// zone the manager does not know).
	invalidSchedule string
	// futureStamps: targets whose restartedAt lies in the future (ignored).
	futureStamps []string
}

// setConditions derives Ready and Degraded. Degraded's reason is the most
// important problem; Ready is its negation (or Suspended).
func setConditions(st *autorebootv1alpha1.RebootPolicyStatus, gen int64, now time.Time, in conditionInput) {
	conds := status.NewConditions(&st.Conditions, gen, now)
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		conds.Set(typ, s, reason, probe.Truncate(msg, 1024))
	}
	if in.suspended {
		set(autorebootv1alpha1.ConditionReady, metav1.ConditionFalse, autorebootv1alpha1.ReasonSuspended, "spec.suspend is true: no probing, no restarts")
		set(autorebootv1alpha1.ConditionDegraded, metav1.ConditionFalse, autorebootv1alpha1.ReasonSuspended, "suspended")
		return
	}
	if reason, msg := degradedReason(st, in); reason != "" {
		set(autorebootv1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
		set(autorebootv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		return
	}
	set(autorebootv1alpha1.ConditionDegraded, metav1.ConditionFalse, autorebootv1alpha1.ReasonAsExpected, "no problem")
	note := ""
	if len(in.futureStamps) > 0 {
		note = fmt.Sprintf("; %s has %s set in the future: ignored", strings.Join(in.futureStamps, ", "), autorebootv1alpha1.RestartedAtAnnotation)
	}
	if in.waiting != "" {
		set(autorebootv1alpha1.ConditionReady, metav1.ConditionTrue, cmp.Or(in.waitingReason, autorebootv1alpha1.ReasonRestartPending),
			"restart pending: "+in.waiting+note)
		return
	}
	set(autorebootv1alpha1.ConditionReady, metav1.ConditionTrue, autorebootv1alpha1.ReasonReconciled, "all policies are running"+note)
}

// degradedReason is the most important problem, if any: a spec the
// controller cannot use, a failed restart, the target, then the first
// policy that reports an Error.
func degradedReason(st *autorebootv1alpha1.RebootPolicyStatus, in conditionInput) (reason, msg string) {
	switch {
	case in.invalidSpec != "":
		return autorebootv1alpha1.ReasonInvalidSpec, in.invalidSpec
	case in.invalidSchedule != "":
		return autorebootv1alpha1.ReasonInvalidSchedule, in.invalidSchedule
	case in.restartFailed != "":
		return autorebootv1alpha1.ReasonRestartFailed, in.restartFailed
	case !in.targetsFound:
		return autorebootv1alpha1.ReasonTargetNotFound, "no target workload found in the namespace"
	case len(in.paused) > 0:
		return autorebootv1alpha1.ReasonTargetPaused, fmt.Sprintf("Deployment %s is paused: a restart would not roll out", strings.Join(in.paused, ","))
	case len(in.onDelete) > 0:
		return autorebootv1alpha1.ReasonTargetOnDelete, fmt.Sprintf("%s uses the OnDelete update strategy: a restart would not roll out", strings.Join(in.onDelete, ","))
	}
	for _, ps := range st.Policies {
		if ps.LastResult == autorebootv1alpha1.ResultError {
			return cmp.Or(ps.Reason, autorebootv1alpha1.ReasonProbeError), fmt.Sprintf("policy %s: %s", ps.Name, ps.Message)
		}
	}
	return "", ""
}
