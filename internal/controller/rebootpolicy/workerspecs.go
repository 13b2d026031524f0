package rebootpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
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

// syncWorkers makes the workers match the spec and copies what they
// published into status.
func (r *Reconciler) syncWorkers(ctx context.Context, p *pass) error {
	nn := client.ObjectKeyFromObject(p.rbp)
	refused, err := r.ensureWorkers(ctx, p.rbp)
	if err != nil {
		return err
	}
	p.refused = refused
	p.acks = r.mergeWorkerStates(p.rbp, r.Workers.Snapshot(nn), refused)
	p.fresh = len(p.acks) > 0
	p.notes = policyNotes(p.persisted, p.rbp)
	return nil
}

// ensureWorkers starts and stops rbp's workers as its admitted policies
// say. With a namespace limit, the decision and the workers it starts are
// one step under the namespace's admission lock (see admitLocked).
func (r *Reconciler) ensureWorkers(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy) (map[string]refusal, error) {
	nn := client.ObjectKeyFromObject(rbp)
	if r.Limits.MaxPerNamespace <= 0 {
		admitted, err := r.admitted(ctx, rbp)
		if err != nil {
			return nil, err
		}
		specs, refused := r.workerSpecs(rbp, admitted)
		r.Workers.Ensure(nn, specs)
		return refused, nil
	}
	// The slots are computed and applied under the namespace's admission
	// lock: a later decision always rests on a cache at least as new.
	// Applying stops every running worker of the namespace that the same
	// decision leaves without a slot (a policy admitted on a cache that
	// had not yet seen an older RebootPolicy gives its slot back as soon
	// as a reconcile sees that one) in the same step that starts rbp's:
	// the namespace's running workers never exceed the limit.
	unlock := r.admission.lock(rbp.Namespace)
	s, err := r.namespaceSlots(ctx, rbp.Namespace)
	if err != nil {
		unlock()
		return nil, err
	}
	specs, refused := r.workerSpecs(rbp, s.of(rbp))
	displaced := r.Workers.Admit(nn, s.has, specs)
	unlock()
	r.Workers.Requeue(slices.DeleteFunc(displaced, func(o types.NamespacedName) bool { return o == nn }))
	return refused, nil
}
