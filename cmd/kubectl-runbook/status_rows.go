package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// current returns the condition of type t when it describes generation gen.
func current(conds []metav1.Condition, t string, gen int64) *metav1.Condition {
	c := meta.FindStatusCondition(conds, t)
	if c == nil || c.ObservedGeneration < gen {
		return nil
	}
	return c
}

// notReconciled is the row of an object whose status does not describe its
// current spec (yet).
func notReconciled(r Row, observed, gen int64) Row {
	r.State, r.Reason = StatePending, "NotReconciled"
	if observed == 0 {
		r.Details = "no status yet: is the manager running with this controller?"
	} else {
		r.Details = fmt.Sprintf("status describes generation %d, the spec is at %d: the controller has not caught up", observed, gen)
	}
	return r
}

func rebootPolicyRow(p *autorebootv1alpha1.RebootPolicy, now time.Time) Row {
	r := Row{Kind: "RebootPolicy", Namespace: p.Namespace, Name: p.Name}
	gen, st := p.Generation, &p.Status
	if p.Spec.Suspend {
		r.State, r.Reason, r.Details = StateSuspended, autorebootv1alpha1.ReasonSuspended, "spec.suspend is true: no probing, no restarts"
		return r
	}
	ready := current(st.Conditions, autorebootv1alpha1.ConditionReady, gen)
	if st.ObservedGeneration < gen || ready == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	if d := current(st.Conditions, autorebootv1alpha1.ConditionDegraded, gen); d != nil && d.Status == metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, d.Reason, d.Message
		return r
	}
	var pending []string
	for _, ps := range st.Policies {
		if ps.PendingTrigger {
			pending = append(pending, ps.Name)
		}
	}
	switch {
	case ready.Status != metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StateDegraded, ready.Reason, ready.Message
	case ready.Reason == autorebootv1alpha1.ReasonRestartPending || ready.Reason == autorebootv1alpha1.ReasonAwaitingApproval || len(pending) > 0:
		r.State, r.Reason = StatePending, autorebootv1alpha1.ReasonRestartPending
		if ready.Reason == autorebootv1alpha1.ReasonAwaitingApproval {
			r.Reason = ready.Reason
		}
		r.Details = ready.Message
		if len(pending) > 0 {
			r.Details = fmt.Sprintf("policy %s fired; %s", strings.Join(pending, ","), ready.Message)
		}
	default:
		r.State, r.Reason = StateHealthy, ready.Reason
		r.Details = policySummary(p, now)
	}
	return r
}

// policySummary: each policy's last result, then the restarts.
func policySummary(p *autorebootv1alpha1.RebootPolicy, now time.Time) string {
	var parts []string
	for _, ps := range p.Status.Policies {
		res := cmp.Or(ps.LastResult, "waiting for its first result")
		if ps.ConsecutiveFailures > 0 {
			res += fmt.Sprintf(" (%d in a row)", ps.ConsecutiveFailures)
		}
		parts = append(parts, ps.Name+": "+res)
	}
	restarts := plural(int(p.Status.RestartCount), "restart")
	if t := p.Status.LastRestartTime; t != nil {
		restarts += ", last " + duration.HumanDuration(now.Sub(t.Time)) + " ago"
	}
	target := string(p.Spec.Target.Kind)
	if p.Spec.Target.Name != "" {
		target += " " + p.Spec.Target.Name
	} else {
		target += "s by selector"
	}
	return fmt.Sprintf("%s; %s; %s", target, strings.Join(parts, ", "), restarts)
}

func memcachedRow(m *cachev1alpha1.Memcached) Row {
	r := Row{Kind: "Memcached", Namespace: m.Namespace, Name: m.Name}
	gen, st := m.Generation, &m.Status
	avail := current(st.Conditions, cachev1alpha1.ConditionAvailable, gen)
	if st.ObservedGeneration < gen || avail == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	if d := current(st.Conditions, cachev1alpha1.ConditionDegraded, gen); d != nil && d.Status == metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, d.Reason, d.Message
		return r
	}
	prog := current(st.Conditions, cachev1alpha1.ConditionProgressing, gen)
	switch {
	case avail.Reason == cachev1alpha1.ReasonParked:
		r.State, r.Reason, r.Details = StateParked, avail.Reason, avail.Message
	case prog != nil && prog.Status == metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StatePending, prog.Reason, prog.Message
	case avail.Status == metav1.ConditionTrue:
		r.State, r.Reason = StateHealthy, avail.Reason
		r.Details = fmt.Sprintf("%d/%d ready; %s in status.servers", st.ReadyReplicas, sizeOf(m), plural(len(st.Servers), "server"))
	default:
		r.State, r.Reason, r.Details = StateDegraded, avail.Reason, avail.Message
	}
	return r
}

// sizeOf is spec.size, or the CRD's default when it is unset.
func sizeOf(m *cachev1alpha1.Memcached) int32 {
	if m.Spec.Size == nil {
		return cachev1alpha1.DefaultSize
	}
	return *m.Spec.Size
}

func nsscalerRow(s *scalingv1alpha1.NSScaler) Row {
	r := Row{Kind: "NSScaler", Name: s.Name}
	gen, st := s.Generation, &s.Status
	if s.Spec.Suspend {
		r.State, r.Reason, r.Details = StateSuspended, scalingv1alpha1.ReasonSuspended, "spec.suspend is true: nothing is parked or restored"
		return r
	}
	ready := current(st.Conditions, scalingv1alpha1.ConditionReady, gen)
	if st.ObservedGeneration < gen || ready == nil {
		return notReconciled(r, st.ObservedGeneration, gen)
	}
	// Degraded covers workload errors and namespaces contested by another
	// NSScaler; Contested (another field manager scaling parked workloads
	// up) is read by name so older CRDs without it still work.
	for _, t := range []string{scalingv1alpha1.ConditionDegraded, "Contested"} {
		if c := current(st.Conditions, t, gen); c != nil && c.Status == metav1.ConditionTrue {
			r.State, r.Reason, r.Details = StateDegraded, c.Reason, c.Message
			return r
		}
	}
	if ready.Status != metav1.ConditionTrue {
		r.State, r.Reason, r.Details = StateDegraded, ready.Reason, ready.Message
		return r
	}
	parked := current(st.Conditions, scalingv1alpha1.ConditionParked, gen)
	summary := fmt.Sprintf("parked: %s (%s%s); running: %s", list(st.ParkedNamespaces), plural(int(st.ParkedWorkloads), "workload"),
		parkedTo(st), list(st.ActiveNamespaces))
	switch {
	case parked == nil:
		r.State, r.Reason, r.Details = StatePending, "NotReconciled", "no Parked condition yet"
	case parked.Status == metav1.ConditionTrue:
		r.State, r.Reason, r.Details = StateParked, parked.Reason, summary
	case parked.Reason == scalingv1alpha1.ReasonNothingParked:
		r.State, r.Reason, r.Details = StateHealthy, parked.Reason, summary
	default:
		r.State, r.Reason, r.Details = StatePending, parked.Reason, parked.Message
	}
	return r
}

// parkedTo says how a parked workload is parked when it keeps replicas
// (spec.parkedReplicas), and how many were left as they were.
func parkedTo(st *scalingv1alpha1.NSScalerStatus) string {
	if st.ParkedReplicas == 0 && st.AtOrBelowParkedReplicas == 0 {
		return ""
	}
	out := fmt.Sprintf(" at %s", plural(int(st.ParkedReplicas), "replica"))
	if st.AtOrBelowParkedReplicas > 0 {
		out += fmt.Sprintf(", %d left at or below", st.AtOrBelowParkedReplicas)
	}
	return out
}
