package nsscaler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// spec.gracePeriod. A workload is judged by its creationTimestamp, which
// the apiserver sets at creation and keeps on every update: whoever may
// create workloads decides when, not what it says. The one doubt is the
// manager's clock against the apiserver's.

// graceEnd is when a workload created at created leaves a grace period of
// grace; zero when it is not in it at now. A creationTimestamp ahead of
// now (the apiserver's clock ahead of the manager's) is believed up to
// grace ahead, so the workload waits at most twice grace from the moment it
// is first seen; a creationTimestamp further ahead says nothing about the
// workload's age and is not believed (the workload is parked as an old
// one). Pure.
func graceEnd(created time.Time, grace time.Duration, now time.Time) time.Time {
	if grace <= 0 || created.IsZero() || created.After(now.Add(grace)) {
		return time.Time{}
	}
	end := created.Add(grace)
	if !end.After(now) {
		return time.Time{}
	}
	return end
}

// applyGrace marks a workload that would be parked now but is younger than
// spec.gracePeriod, counts it per namespace and arranges the reconcile at
// the end of its grace. A workload with a recorded original is already
// parked: the grace period has nothing to keep running. One that runs
// spec.parkedReplicas or fewer would not be parked at its end either.
func (p *workloadPass) applyGrace(w *Workload) {
	if p.grace <= 0 || w.HasAnnotation || !p.plan.Parked.Has(w.Namespace) || !p.kinds.Has(w.parkKind()) ||
		w.Controlled || w.Excluded || w.Autoscaled || w.atOrBelow(p.plan.ParkedReplicas) {
		return
	}
	end := graceEnd(w.Created, p.grace, p.now)
	if end.IsZero() {
		return
	}
	w.InGrace = true
	p.obs.inGrace(w.Namespace, end)
}

// carryPassFacts gives a workload re-read after a conflict what the pass
// had set on the copy it decided on (exclusions and KEDA are not looked up
// again for one workload; a reconcile follows the change that caused the
// conflict), and evaluates its grace again.
func (p *workloadPass) carryPassFacts(fresh *Workload, decided Workload) {
	if fresh.UID == decided.UID {
		fresh.Excluded, fresh.Autoscaled = decided.Excluded, decided.Autoscaled
		if fresh.Kind.pauses() {
			fresh.Replicas = decided.Replicas
		}
	}
	if !fresh.HasAnnotation && !graceEnd(fresh.Created, p.grace, p.now).IsZero() &&
		isTarget(*fresh, p.plan, p.kinds) && !fresh.atOrBelow(p.plan.ParkedReplicas) {
		fresh.InGrace = true
	}
}

// graceTally is what one namespace's workloads in grace amount to.
type graceTally struct {
	workloads int32
	// until is when the last of them leaves its grace.
	until time.Time
}

// inGrace counts a workload in its grace period until end and makes the
// controller reconcile then. The instants are creationTimestamps plus the
// grace period: a tenant who creates workloads causes at most one such
// reconcile per creation, and each creation already causes one.
func (o *observation) inGrace(namespace string, end time.Time) {
	if o.grace == nil {
		o.grace = map[string]*graceTally{}
	}
	t := o.grace[namespace]
	if t == nil {
		t = &graceTally{}
		o.grace[namespace] = t
	}
	t.workloads++
	if end.After(t.until) {
		t.until = end
	}
	o.workloadsInGrace++
	o.wakeAt(end)
}

// maxGraceListed bounds status.inGrace (status.workloadsInGrace has the
// full count).
const maxGraceListed = 10

// graceList is status.inGrace: the first namespaces by name.
func graceList(tallies map[string]*graceTally) []scalingv1alpha1.NamespaceGrace {
	out := make([]scalingv1alpha1.NamespaceGrace, 0, len(tallies))
	for ns, t := range tallies {
		out = append(out, scalingv1alpha1.NamespaceGrace{Namespace: ns, Workloads: t.workloads, Until: statusTime(t.until)})
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.NamespaceGrace) int { return strings.Compare(a.Namespace, b.Namespace) })
	if len(out) > maxGraceListed {
		out = out[:maxGraceListed]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// gracePeriodOf is spec.gracePeriod as a duration (0: none).
func gracePeriodOf(d *metav1.Duration) time.Duration {
	if d == nil || d.Duration < 0 {
		return 0
	}
	return d.Duration
}

// graceMessage says how many workloads wait and until when the last one
// does.
func graceMessage(tallies map[string]*graceTally, total int32) string {
	var last time.Time
	for _, t := range tallies {
		if t.until.After(last) {
			last = t.until
		}
	}
	return fmt.Sprintf("%d workloads in %d namespaces are younger than gracePeriod; the last is parked at %s",
		total, len(tallies), statusTime(last).Format(time.RFC3339))
}

// setParkingStatus reports how workloads are parked: parkedReplicas and
// gracePeriod in force, the workloads left at or below parkedReplicas, and
// those in their grace period.
func setParkingStatus(st *scalingv1alpha1.NSScalerStatus, obs *observation) {
	st.ParkedReplicas = obs.plan.ParkedReplicas
	if obs.gracePeriod > 0 {
		st.GracePeriod = &metav1.Duration{Duration: obs.gracePeriod}
	}
	st.AtOrBelowParkedReplicas = obs.atOrBelow
	st.WorkloadsInGrace = obs.workloadsInGrace
	st.InGrace = graceList(obs.grace)
}
