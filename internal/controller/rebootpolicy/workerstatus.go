package rebootpolicy

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
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
