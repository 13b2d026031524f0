package rebootpolicy

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// defaultProgressDeadline applies to a sequence without
// spec.rollout.progressDeadline: the Deployment's own default.
const defaultProgressDeadline = 10 * time.Minute

// Reasons of a halt (status.rollout.halted.reason).
const (
	haltDeadlineExceeded = "ProgressDeadlineExceeded"
	haltStalled          = "RolloutStalled"
	haltNotAvailable     = "NotAvailable"
)

// progressDeadline is how long a restarted target of rbp's sequence may
// take to become available; 0 when rbp restarts no sequence (no
// maxConcurrent), which no halt gates.
func progressDeadline(rbp *autorebootv1alpha1.RebootPolicy) time.Duration {
	ro := rbp.Spec.Rollout
	if ro == nil || ro.MaxConcurrent == nil {
		return 0
	}
	if ro.ProgressDeadline != nil && ro.ProgressDeadline.Duration > 0 {
		return ro.ProgressDeadline.Duration
	}
	return defaultProgressDeadline
}

// restartJudgement is what the health gate makes of one target.
type restartJudgement struct {
	halted *autorebootv1alpha1.HaltedRestart
	// judgeAt: the deadline the restart is still within (zero: none).
	judgeAt time.Time
}

// judgeRestart looks at a target's last restart by rbp. A restart halts
// the sequence when the target is not available and either its own
// deadline passed (a Deployment's ProgressDeadlineExceeded, a StatefulSet
// or DaemonSet stalled since the restart) or rollout.progressDeadline did.
// A restart older than the throttle's rolloutTimeout, made before the
// last resume, or seen available since, halts nothing: the gate is about
// a rollout that never got there, not about a target that fails later
// (that is what probes are for).
func (r *Reconciler) judgeRestart(p *pass, t targetInfo, deadline time.Duration, prev *autorebootv1alpha1.HaltedRestart) restartJudgement {
	if !strings.HasPrefix(t.restartID, p.rbp.Name+"/") || t.restartedAt.IsZero() {
		return restartJudgement{}
	}
	if rs := p.rbp.Status.Rollout; rs != nil && rs.ResumeTime != nil && t.restartedAt.Before(rs.ResumeTime.Time) {
		return restartJudgement{}
	}
	v, _ := viewOf(t.obj)
	stalls := r.Throttle.rolloutStalls()
	if v.phase(true, t.obj.GetGeneration(), stalls.stalled(t.obj, v, p.now)) == rolloutComplete {
		return restartJudgement{}
	}
	stamp := v.template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	if prev != nil && prev.Kind == t.kind && prev.Name == t.obj.GetName() && prev.RestartedAt == stamp {
		// Halted already: it stays so until resumed or available.
		return restartJudgement{halted: prev}
	}
	if p.now.Sub(t.restartedAt) >= r.Throttle.rolloutTimeoutOr(defaultRolloutTimeout) ||
		r.Throttle.availableSince(v.key(t.obj), t.restartedAt) || availableSince(t.obj, t.restartedAt) {
		return restartJudgement{}
	}
	h := &autorebootv1alpha1.HaltedRestart{Kind: t.kind, Name: t.obj.GetName(), RestartedAt: stamp, Since: metav1.Time{Time: p.now}}
	avail := fmt.Sprintf("%d of %d replicas updated, %d available, %d pods", v.updated, v.want, v.available, v.replicas)
	switch {
	case v.observed >= t.obj.GetGeneration() && v.deadlineExceeded:
		h.Reason = haltDeadlineExceeded
		h.Message = fmt.Sprintf("the Deployment's progressDeadlineSeconds passed after the restart (%s)", avail)
	case stalls.stalledSince(v.key(t.obj), t.restartedAt, p.now):
		h.Reason = haltStalled
		h.Message = fmt.Sprintf("the rollout has not moved for %s (%s)", stallDeadline+time.Duration(v.minReady)*time.Second, avail)
	case p.now.Sub(t.restartedAt) >= deadline:
		h.Reason = haltNotAvailable
		h.Message = fmt.Sprintf("not available %s after the restart (%s)", deadline, avail)
	default:
		return restartJudgement{judgeAt: t.restartedAt.Add(deadline)}
	}
	return restartJudgement{halted: h}
}

// availableSince: a Deployment reported its new ReplicaSet available at
// or after the restart (the Deployment controller keeps that in the
// Progressing condition), so a later loss of availability is not the
// restart's doing.
func availableSince(obj any, restarted time.Time) bool {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable" &&
			!c.LastUpdateTime.Time.Before(restarted.Truncate(time.Second)) && d.Status.ObservedGeneration >= d.Generation {
			return true
		}
	}
	return false
}

// observeHalt decides whether rbp's sequence is halted, keeps the halted
// restart's slot released, and sets an alarm for the next deadline.
func (r *Reconciler) observeHalt(p *pass) {
	deadline := progressDeadline(p.rbp)
	var prev *autorebootv1alpha1.HaltedRestart
	if rs := p.rbp.Status.Rollout; rs != nil {
		prev = rs.Halted
	}
	var halted *autorebootv1alpha1.HaltedRestart
	var next time.Time
	if deadline > 0 {
		for _, t := range p.targets {
			j := r.judgeRestart(p, t, deadline, prev)
			if j.halted != nil {
				// The halted restart has ended for the throttle, as a stuck
				// one does; the halt keeps this policy from going on.
				r.Throttle.endHalted(t.obj, t.restartedAt, p.rbp)
				if halted == nil || j.halted.Name < halted.Name {
					halted = j.halted
				}
			}
			if !j.judgeAt.IsZero() && (next.IsZero() || j.judgeAt.Before(next)) {
				next = j.judgeAt
			}
		}
	}
	r.Throttle.alarmAt(keyOfPolicy(p.rbp), next)
	r.Metrics.setHalted(keyOfPolicy(p.rbp), halted != nil)
	setHalted(p, halted, prev)
	if halted != nil {
		p.in.halted = haltMessage(p.rbp, halted)
		if p.pending {
			p.decision.waiting += len(p.decision.restart)
			p.decision.restart = nil
		}
	}
}

// setHalted records the halt in status and the transition's notes.
func setHalted(p *pass, halted, prev *autorebootv1alpha1.HaltedRestart) {
	if halted == nil && p.rbp.Status.Rollout == nil {
		return
	}
	rs := rolloutStatusOf(p.rbp)
	rs.Halted = halted
	switch {
	case halted != nil && (prev == nil || prev.Name != halted.Name || prev.RestartedAt != halted.RestartedAt):
		p.gate.halted = halted
	case halted == nil && prev != nil && !p.gate.resumed:
		p.gate.recovered = prev
	}
}

func rolloutStatusOf(rbp *autorebootv1alpha1.RebootPolicy) *autorebootv1alpha1.RolloutStatus {
	if rbp.Status.Rollout == nil {
		rbp.Status.Rollout = &autorebootv1alpha1.RolloutStatus{}
	}
	return rbp.Status.Rollout
}

// haltMessage is the Degraded message of a halted sequence. What to do
// comes before why, so that a table cut to its first 100 characters
// (kubectl runbook status) still says how to go on.
func haltMessage(rbp *autorebootv1alpha1.RebootPolicy, h *autorebootv1alpha1.HaltedRestart) string {
	return fmt.Sprintf("halted at %s %s until `kubectl runbook resume %s` or it becomes available: %s",
		h.Kind, h.Name, rbp.Name, h.Message)
}
