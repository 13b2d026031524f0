package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// maxMessageErrors bounds how many errors a condition message lists.
const maxMessageErrors = 3

// computeStatus turns an observation into the NSScaler's status. Pure apart
// from the clock, which stamps changed conditions.
func computeStatus(scaler *scalingv1alpha1.NSScaler, obs *observation, now metav1.Time) scalingv1alpha1.NSScalerStatus {
	st := scalingv1alpha1.NSScalerStatus{
		ObservedGeneration:   scaler.Generation,
		Conditions:           append([]metav1.Condition(nil), scaler.Status.Conditions...),
		ParkedNamespaces:     sets.List(obs.plan.Parked),
		ActiveNamespaces:     sets.List(obs.plan.Active),
		ParkedNamespaceCount: int32(obs.plan.Parked.Len()),
		ActiveNamespaceCount: int32(obs.plan.Active.Len()),
		Conflicts:            obs.plan.Conflicts,
		ParkedWorkloads:      obs.parkedWorkloads,
		ControlledWorkloads:  obs.controlled,
		PodsRemaining:        obs.podsRemaining,
		ParkedKinds:          obs.parkedKinds,
	}
	st.Done = obs.pendingTargets == 0 && len(obs.workloadErrs) == 0 && obs.podsRemaining == 0
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: scaler.Generation, LastTransitionTime: now,
		})
	}

	// Ready: did the last reconcile apply the spec?
	switch {
	case obs.planErr != nil:
		set(scalingv1alpha1.ConditionReady, metav1.ConditionFalse, scalingv1alpha1.ReasonInvalidSelector, obs.planErr.Error())
	case len(obs.workloadErrs) > 0:
		set(scalingv1alpha1.ConditionReady, metav1.ConditionFalse, scalingv1alpha1.ReasonReconcileError,
			fmt.Sprintf("%d workloads could not be written; retrying", len(obs.workloadErrs)))
	case !scaler.DeletionTimestamp.IsZero():
		set(scalingv1alpha1.ConditionReady, metav1.ConditionFalse, scalingv1alpha1.ReasonRestoring, "restoring parked workloads before deletion")
	case scaler.Spec.Suspend:
		set(scalingv1alpha1.ConditionReady, metav1.ConditionTrue, scalingv1alpha1.ReasonSuspended, "suspended: nothing is parked or restored")
	default:
		msg := fmt.Sprintf("%d namespaces parked, %d active", st.ParkedNamespaceCount, st.ActiveNamespaceCount)
		if obs.plan.Protected.Len() > 0 {
			msg += fmt.Sprintf("; protected namespaces never parked: %s", strings.Join(sets.List(obs.plan.Protected), ", "))
		}
		set(scalingv1alpha1.ConditionReady, metav1.ConditionTrue, scalingv1alpha1.ReasonReconciled, msg)
	}

	// Parked: is every pod gone from the parked namespaces?
	switch {
	case obs.plan.Parked.Len() == 0:
		set(scalingv1alpha1.ConditionParked, metav1.ConditionFalse, scalingv1alpha1.ReasonNothingParked, "no namespace is parked")
	case obs.pendingTargets > 0 || len(obs.workloadErrs) > 0:
		set(scalingv1alpha1.ConditionParked, metav1.ConditionFalse, scalingv1alpha1.ReasonWorkloadsPending,
			fmt.Sprintf("%d workloads are not parked yet", obs.pendingTargets))
	case obs.podsRemaining > 0:
		set(scalingv1alpha1.ConditionParked, metav1.ConditionFalse, scalingv1alpha1.ReasonPodsRemaining,
			fmt.Sprintf("%d pods remain in parked namespaces", obs.podsRemaining))
	default:
		set(scalingv1alpha1.ConditionParked, metav1.ConditionTrue, scalingv1alpha1.ReasonAllPodsGone,
			fmt.Sprintf("no pods remain in %d parked namespaces", st.ParkedNamespaceCount))
	}

	// Degraded: the most actionable problem gives the reason; all are listed.
	var reasons []string
	var msgs []string
	add := func(reason string, errs []error) {
		if len(errs) == 0 {
			return
		}
		reasons = append(reasons, reason)
		msgs = append(msgs, reason+": "+summarize(errs))
	}
	if obs.planErr != nil {
		add(scalingv1alpha1.ReasonInvalidSelector, []error{obs.planErr})
	}
	add(scalingv1alpha1.ReasonWorkloadErrors, obs.workloadErrs)
	add(scalingv1alpha1.ReasonKindUnavailable, obs.kindErrs)
	add(scalingv1alpha1.ReasonInvalidAnnotation, obs.invalid)
	if len(obs.plan.Conflicts) > 0 {
		var cs []error
		for _, c := range obs.plan.Conflicts {
			if c.Owner == scaler.Name {
				cs = append(cs, fmt.Errorf("namespace %s is also selected by another NSScaler; this one (the oldest) parks it", c.Namespace))
			} else {
				cs = append(cs, fmt.Errorf("namespace %s is parked by the older NSScaler %s and left alone here", c.Namespace, c.Owner))
			}
		}
		add(scalingv1alpha1.ReasonNamespaceConflict, cs)
	}
	if len(reasons) > 0 {
		set(scalingv1alpha1.ConditionDegraded, metav1.ConditionTrue, reasons[0], strings.Join(msgs, "; "))
	} else {
		set(scalingv1alpha1.ConditionDegraded, metav1.ConditionFalse, scalingv1alpha1.ReasonAsExpected, "")
	}
	return st
}

func summarize(errs []error) string {
	n := len(errs)
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

// writeStatus updates metrics and patches the status when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) error {
	st := computeStatus(scaler, obs, metav1.NewTime(r.Clock.Now()))
	r.Metrics.ParkedNamespaces.WithLabelValues(scaler.Name).Set(float64(st.ParkedNamespaceCount))
	r.Metrics.ParkedWorkloads.WithLabelValues(scaler.Name).Set(float64(st.ParkedWorkloads))
	r.Metrics.PodsRemaining.WithLabelValues(scaler.Name).Set(float64(st.PodsRemaining))
	if equality.Semantic.DeepEqual(st, scaler.Status) {
		return nil
	}
	before := scaler.DeepCopy()
	scaler.Status = st
	if err := r.Client.Status().Patch(ctx, scaler, client.MergeFrom(before), client.FieldOwner(FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing status: %w", err))
	}
	return nil
}
