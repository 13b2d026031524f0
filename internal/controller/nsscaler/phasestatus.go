package nsscaler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// maxContestedListed bounds status.contested (status.contestedWorkloads
// has the full count).
const maxContestedListed = 10

// setTimeStatus fills what `kubectl get nss` shows a newcomer — the phase,
// why, until when — and the counts behind it. Everything here is a
// function of the spec, the moment and what the pass saw, never of the
// clock's reading itself, so a status computed again between two
// transitions equals the one written and sends nothing.
func setTimeStatus(st *scalingv1alpha1.NSScalerStatus, obs *observation) {
	st.Phase, st.Reason = phaseAndReason(obs)
	if !obs.nextTransition.IsZero() && !obs.deleting && obs.moment.err == nil {
		t := statusTime(obs.nextTransition)
		st.NextTransition = &t
	}
	st.ActiveException = obs.moment.verdict.Exception
	st.Woken = obs.moment.wakeEntries()
	st.ExcludedWorkloads = obs.excluded
	st.ContestedWorkloads = int32(len(obs.contested))
	st.Contested = contestedList(obs.contested)
	if obs.dryRun && !obs.deleting {
		st.DryRun = &scalingv1alpha1.DryRunStatus{WouldPark: obs.wouldPark, WouldRestore: obs.wouldRestore}
	}
}

// phaseAndReason: the phase the plan amounts to and the words for it. An
// invalid schedule has no phase (nothing is acted on, so none can be
// claimed).
func phaseAndReason(obs *observation) (scalingv1alpha1.Phase, string) {
	switch {
	case obs.deleting:
		return scalingv1alpha1.PhaseAwake, "being deleted: restoring every parked workload"
	case obs.moment.err != nil:
		return "", obs.moment.verdict.Reason + "; nothing is parked or restored until it is fixed"
	}
	reason := obs.moment.verdict.Reason
	// While something sleeps, say what does not and why (a Partial phase).
	if whitelisted := obs.plan.Active.Difference(obs.plan.Woken); obs.plan.Parked.Len() > 0 && whitelisted.Len() > 0 {
		reason += fmt.Sprintf("; %s whitelisted", namespacesPhrase(whitelisted, maxMessageErrors))
	}
	reason += wokenPhrase(obs)
	switch {
	case obs.suspended:
		reason = "suspended; " + reason
	case obs.dryRun:
		reason = "dry run; " + reason
	}
	return obs.plan.phase(), reason
}

// namespacesPhrase names up to limit namespaces, then counts the rest:
// status messages stay short however many namespaces a selector reaches.
func namespacesPhrase(s sets.Set[string], limit int) string {
	names := sets.List(s)
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

// contestedList is status.contested: the first maxContestedListed by
// namespace, kind and name.
func contestedList(c []contestedWorkload) []scalingv1alpha1.ContestedWorkload {
	if len(c) == 0 {
		return nil
	}
	out := make([]scalingv1alpha1.ContestedWorkload, 0, len(c))
	for _, cw := range c {
		out = append(out, scalingv1alpha1.ContestedWorkload{
			Kind: cw.w.Kind.String(), Namespace: cw.w.Namespace, Name: cw.w.Name,
			Manager: cw.manager, RetryAt: statusTime(cw.retryAt),
		})
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.ContestedWorkload) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	if len(out) > maxContestedListed {
		out = out[:maxContestedListed]
	}
	return out
}

// setContested: is another field manager keeping workloads from being
// parked?
func setContested(c status.Conditions, obs *observation) {
	if len(obs.contested) == 0 {
		c.False(scalingv1alpha1.ConditionContested, scalingv1alpha1.ReasonNoConflict, "")
		return
	}
	sorted := slices.Clone(obs.contested)
	slices.SortFunc(sorted, func(a, b contestedWorkload) int { return cmp.Compare(workloadRef(a.w), workloadRef(b.w)) })
	c.True(scalingv1alpha1.ConditionContested, scalingv1alpha1.ReasonFieldManagerConflict, contestedMessage(sorted))
}

// dryRunMessage is the Ready message of a DryRun NSScaler.
func dryRunMessage(obs *observation) string {
	msg := fmt.Sprintf("dry run: nothing is written; would park %d workloads and restore %d now", obs.wouldPark, obs.wouldRestore)
	if !obs.nextTransition.IsZero() {
		msg += "; the schedule changes next at " + statusTime(obs.nextTransition).Format("2006-01-02T15:04:05Z07:00")
	}
	return msg
}
