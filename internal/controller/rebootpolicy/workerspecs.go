package rebootpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// workerSpecs computes the desired workers of rbp from the policies
// admitted to its namespace's share. Policies that may not run (invalid,
// below the minimum period, beyond the namespace's share, an exec script
// that is not allowed) are returned in refused and get no worker.
func (r *Reconciler) workerSpecs(rbp *autorebootv1alpha1.RebootPolicy, admitted map[string]bool) ([]probe.WorkerSpec, map[string]refusal) {
	nn := client.ObjectKeyFromObject(rbp)
	byName := map[string]autorebootv1alpha1.PolicyStatus{}
	for _, ps := range rbp.Status.Policies {
		byName[ps.Name] = ps
	}
	refused := map[string]refusal{}
	specs := make([]probe.WorkerSpec, 0, len(rbp.Spec.Policies))
	for _, p := range rbp.Spec.Policies {
		if rf := r.refusal(p, admitted[p.Name]); rf != nil {
			refused[p.Name] = *rf
			continue
		}
		ps := byName[p.Name]
		spec := probe.WorkerSpec{
			Key:     probe.WorkerKey{Object: nn, Policy: p.Name},
			Hash:    triggerHash(nn.Namespace, p.Trigger),
			Trigger: *p.Trigger.DeepCopy(),
			Baseline: probe.PolicyState{
				Fingerprint: ps.Fingerprint, TriggerHash: ps.TriggerHash,
				LastResult: ps.LastResult, Reason: ps.Reason, Message: ps.Message,
			},
		}
		if p.Trigger.Referenced != nil {
			// The targets are part of what a referenced trigger observes.
			spec.Target = *rbp.Spec.Target.DeepCopy()
			spec.Hash = referencedHash(nn.Namespace, p.Trigger, spec.Target)
			spec.Baseline.Targets = targetBaselines(ps.Targets)
		}
		specs = append(specs, spec)
	}
	return specs, refused
}

// refusal says why policy p may not run, or nil.
func (r *Reconciler) refusal(p autorebootv1alpha1.Policy, admitted bool) *refusal {
	if rf := r.Limits.specRefusal(p); rf != nil {
		return rf
	}
	if !admitted {
		rf := tooManyProbes(r.Limits.MaxPerNamespace)
		return &rf
	}
	if p.Trigger.Probe != nil && p.Trigger.Probe.Exec != nil {
		script := ""
		if len(p.Trigger.Probe.Exec.Command) > 0 {
			script = p.Trigger.Probe.Exec.Command[0]
		}
		if _, err := probe.ResolveScript(r.ExecProbeDir, script); err != nil {
			return &refusal{autorebootv1alpha1.ReasonExecNotAllowed, err.Error()}
		}
	}
	return nil
}

// triggerHash identifies a trigger spec; workers restart when it changes.
func triggerHash(namespace string, t autorebootv1alpha1.Trigger) string {
	b, _ := json.Marshal(struct {
		NS string                     `json:"ns"`
		T  autorebootv1alpha1.Trigger `json:"t"`
	}{namespace, t})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// referencedHash is triggerHash for a referenced trigger: the target
// (kind, name or selector) is part of it.
func referencedHash(namespace string, t autorebootv1alpha1.Trigger, target autorebootv1alpha1.TargetRef) string {
	b, _ := json.Marshal(struct {
		NS     string                       `json:"ns"`
		T      autorebootv1alpha1.Trigger   `json:"t"`
		Target autorebootv1alpha1.TargetRef `json:"target"`
	}{namespace, t, target})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// targetBaselines turns the per-target status of a referenced trigger into
// the worker's starting baselines.
func targetBaselines(ts []autorebootv1alpha1.ReferencedTargetStatus) map[string]probe.TargetState {
	if len(ts) == 0 {
		return nil
	}
	out := make(map[string]probe.TargetState, len(ts))
	for _, t := range ts {
		out[t.Name] = probe.TargetState{References: t.References, Fingerprint: t.Fingerprint}
	}
	return out
}

func minRestartInterval(rbp *autorebootv1alpha1.RebootPolicy) time.Duration {
	if rbp.Spec.MinRestartInterval == nil {
		return defaultMinRestartInterval
	}
	return rbp.Spec.MinRestartInterval.Duration
}
