package rebootpolicy

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/probe"
)

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
	// kindNotServed: the target kind's CRD is not installed.
	kindNotServed string
	// invalidSchedule: spec.restartSchedule cannot be evaluated (a time
	// zone the manager does not know).
	invalidSchedule string
	// futureStamps: targets whose restartedAt lies in the future (ignored).
	futureStamps []string
	// halted: the sequence is halted (halt.go); the message says where.
	halted string
	// alertsProblem: the alerts gate cannot open (alerts.go), for the
	// reason alertsReason.
	alertsReason, alertsProblem string
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
	case in.kindNotServed != "":
		return autorebootv1alpha1.ReasonTargetKindNotInstalled, in.kindNotServed
	case in.invalidSchedule != "":
		return autorebootv1alpha1.ReasonInvalidSchedule, in.invalidSchedule
	case in.restartFailed != "":
		return autorebootv1alpha1.ReasonRestartFailed, in.restartFailed
	case in.halted != "":
		return autorebootv1alpha1.ReasonRolloutHalted, in.halted
	case in.alertsProblem != "":
		return in.alertsReason, in.alertsProblem
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
