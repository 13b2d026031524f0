package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// maxMessageErrors bounds how many errors a condition message lists.
const maxMessageErrors = 3

// maxProtectedListed bounds the protected namespaces the Ready message names.
const maxProtectedListed = 10

// writeStatus updates the metrics and writes the status when it changed.
// The status writer computes it on a fresh read when the cached NSScaler may
// predate the controller's own last status write, and again on a conflict:
// a status is never merged onto a copy older than what the server holds.
func (r *Reconciler) writeStatus(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) error {
	r.metrics.ParkedNamespaces.WithLabelValues(scaler.Name).Set(float64(obs.plan.Parked.Len()))
	r.metrics.ParkedWorkloads.WithLabelValues(scaler.Name).Set(float64(obs.parkedWorkloads))
	r.metrics.PodsRemaining.WithLabelValues(scaler.Name).Set(float64(obs.podsRemaining))
	r.metrics.setGitOpsPaused(scaler.Name, gitOpsPausedByKind(&obs.gitOps))
	now := r.clock.Now()
	_, err := r.status.Update(ctx, scaler, func() error {
		scaler.Status = computeStatus(scaler, obs, now)
		return nil
	})
	if err == nil {
		r.metrics.saved.set(scaler.Name, scaler.Status.Savings)
	}
	return client.IgnoreNotFound(err)
}

// computeStatus turns an observation into the NSScaler's status. scaler is
// the copy the status is written onto: its conditions keep their transition
// times when unchanged. Pure apart from now, which stamps changed conditions.
func computeStatus(scaler *scalingv1alpha1.NSScaler, obs *observation, now time.Time) scalingv1alpha1.NSScalerStatus {
	st := scalingv1alpha1.NSScalerStatus{
		ObservedGeneration:   obs.generation,
		Conditions:           slices.Clone(scaler.Status.Conditions),
		ParkedNamespaces:     sets.List(obs.plan.Parked),
		ActiveNamespaces:     sets.List(obs.plan.Active),
		ParkedNamespaceCount: int32(obs.plan.Parked.Len()),
		ActiveNamespaceCount: int32(obs.plan.Active.Len()),
		Conflicts:            obs.plan.Conflicts,
		ParkedWorkloads:      obs.parkedWorkloads,
		ControlledWorkloads:  obs.controlled,
		PodsRemaining:        obs.podsRemaining,
		ParkedKinds:          obs.parkedKinds,
		Done: obs.pendingTargets == 0 && len(obs.workloadErrs) == 0 && obs.workloadsInGrace == 0 &&
			obs.podsRemaining <= obs.keptPods,
	}
	setTimeStatus(&st, obs)
	setParkingStatus(&st, obs)
	setSelfServiceStatus(&st, scaler, obs)
	st.Savings = scaler.Status.Savings
	if !obs.savingsBlind {
		st.Savings = nextSavings(scaler.Status.Savings, obs.saved, obs.plan.Parked.Union(obs.plan.Active), now, scaler.Spec.Prices)
	}
	conditions := status.NewConditions(&st.Conditions, obs.generation, now)
	setReady(conditions, obs)
	setParked(conditions, obs)
	setDegraded(conditions, degradedProblems(scaler.Name, obs))
	setContested(conditions, obs)
	st.GitOps = gitOpsStatus(&obs.gitOps)
	setGitOpsPaused(&st.Conditions, conditions, &obs.gitOps)
	return st
}

// setReady: did the last reconcile apply the spec?
func setReady(c status.Conditions, obs *observation) {
	switch {
	case obs.planErr != nil:
		c.False(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonInvalidSelector, obs.planErr.Error())
	case obs.moment.err != nil && !obs.deleting:
		c.False(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonInvalidSchedule,
			obs.moment.err.Error()+"; nothing is parked or restored until it is fixed")
	case len(obs.workloadErrs) > 0:
		c.False(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonReconcileError,
			fmt.Sprintf("%d workloads could not be written; retrying", len(obs.workloadErrs)))
	case obs.deleting:
		c.False(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonRestoring, "restoring parked workloads before deletion")
	case obs.suspended:
		c.True(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonSuspended, "suspended: nothing is parked or restored")
	case obs.dryRun:
		c.True(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonDryRun, dryRunMessage(obs))
	default:
		msg := fmt.Sprintf("%d namespaces parked, %d active", obs.plan.Parked.Len(), obs.plan.Active.Len())
		if obs.plan.Protected.Len() > 0 {
			msg += fmt.Sprintf("; protected namespaces never parked: %s", namespacesPhrase(obs.plan.Protected, maxProtectedListed))
		}
		c.True(scalingv1alpha1.ConditionReady, scalingv1alpha1.ReasonReconciled, msg)
	}
}

// setParked: is every pod gone from the parked namespaces?
func setParked(c status.Conditions, obs *observation) {
	switch {
	case obs.plan.Parked.Len() == 0:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonNothingParked, "no namespace is parked")
	case obs.dryRun && !obs.deleting:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonDryRun, "dry run: nothing is parked")
	case obs.pendingTargets > 0 || len(obs.workloadErrs) > 0:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonWorkloadsPending,
			fmt.Sprintf("%d workloads are not parked yet", obs.pendingTargets))
	case obs.workloadsInGrace > 0:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonWorkloadsInGrace, graceMessage(obs.grace, obs.workloadsInGrace))
	case obs.podsRemaining > obs.keptPods && obs.keptPods > 0:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonPodsRemaining,
			fmt.Sprintf("%d pods remain in parked namespaces, %d of them kept by parkedReplicas", obs.podsRemaining, obs.keptPods))
	case obs.podsRemaining > obs.keptPods:
		c.False(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonPodsRemaining,
			fmt.Sprintf("%d pods remain in parked namespaces", obs.podsRemaining))
	case obs.keptPods > 0:
		c.True(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonParkedReplicasRunning,
			fmt.Sprintf("only the pods parkedReplicas keeps remain in %d parked namespaces (%d pods, %d expected)",
				obs.plan.Parked.Len(), obs.podsRemaining, obs.keptPods))
	default:
		c.True(scalingv1alpha1.ConditionParked, scalingv1alpha1.ReasonAllPodsGone,
			fmt.Sprintf("no pods remain in %d parked namespaces", obs.plan.Parked.Len()))
	}
}

// problem is one reason for Degraded and the errors behind it.
type problem struct {
	reason string
	errs   []error
}

// setDegraded: the most actionable problem gives the reason; all are listed.
func setDegraded(c status.Conditions, problems []problem) {
	if len(problems) == 0 {
		c.False(scalingv1alpha1.ConditionDegraded, scalingv1alpha1.ReasonAsExpected, "")
		return
	}
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.reason+": "+summarize(p.errs))
	}
	c.True(scalingv1alpha1.ConditionDegraded, problems[0].reason, strings.Join(msgs, "; "))
}

// degradedProblems lists what went wrong, most actionable first.
func degradedProblems(self string, obs *observation) []problem {
	var problems []problem
	add := func(reason string, errs []error) {
		if len(errs) > 0 {
			problems = append(problems, problem{reason: reason, errs: errs})
		}
	}
	if obs.planErr != nil {
		add(scalingv1alpha1.ReasonInvalidSelector, []error{obs.planErr})
	}
	add(scalingv1alpha1.ReasonWorkloadErrors, obs.workloadErrs)
	add(scalingv1alpha1.ReasonKindUnavailable, obs.kindErrs)
	add(scalingv1alpha1.ReasonInvalidAnnotation, obs.invalid)
	add(scalingv1alpha1.ReasonNamespaceConflict, conflictErrors(self, obs.plan.Conflicts))
	return problems
}

// conflictErrors says, per contested namespace, who acts on it.
func conflictErrors(self string, conflicts []scalingv1alpha1.NamespaceConflict) []error {
	var errs []error
	for _, c := range conflicts {
		if c.Owner == self {
			errs = append(errs, fmt.Errorf("namespace %s is also selected by another NSScaler; this one (the oldest) parks it", c.Namespace))
		} else {
			errs = append(errs, fmt.Errorf("namespace %s is parked by the older NSScaler %s and left alone here", c.Namespace, c.Owner))
		}
	}
	return errs
}

// summarize lists the first errors in order of their text: the cache
// lists objects in no particular order, and a message that changed with it
// would be a status write each reconcile.
func summarize(errs []error) string {
	n := len(errs)
	errs = slices.Clone(errs)
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	shown := errs
	if n > maxMessageErrors {
		shown = errs[:maxMessageErrors]
	}
	s := errors.Join(shown...).Error()
	s = strings.ReplaceAll(s, "\n", "; ")
	if n > maxMessageErrors {
		s += fmt.Sprintf(" (and %d more)", n-maxMessageErrors)
	}
	return s
}
