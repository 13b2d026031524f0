package nsscaler

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

// KindKey identifies a kind of workload: Group is empty for the built-in kinds.
type KindKey struct {
	Group string
	Kind  string
}

func (k KindKey) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

func kindKeyOf(k scalingv1alpha1.WorkloadKind) KindKey { return KindKey{Group: k.Group, Kind: k.Kind} }

var (
	kindDeployment  = KindKey{Kind: scalingv1alpha1.KindDeployment}
	kindStatefulSet = KindKey{Kind: scalingv1alpha1.KindStatefulSet}
	kindCronJob     = KindKey{Kind: scalingv1alpha1.KindCronJob}
)

// Workload is the part of a parkable object the controller decides on.
type Workload struct {
	Kind            KindKey
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Created is the creationTimestamp (spec.gracePeriod).
	Created time.Time
	// Replicas is the desired replica count (scalable kinds); for a
	// ScaledObject, set by the workload pass, its target's.
	Replicas int32
	// Suspend is the CronJob's suspend flag.
	Suspend bool
	// Requests are one pod's effective requests (Deployments and
	// StatefulSets: read from the pod template for the savings report).
	Requests savings.Requests
	// Annotation is the raw value of AnnotationOriginal, when present.
	Annotation    string
	HasAnnotation bool
	// Controlled is true when an owner reference has controller: true.
	Controlled bool
	// Labels are the workload's own labels (for spec.excludeSelector).
	Labels map[string]string
	// Exclude and ExcludeUntil are the raw values of AnnotationExclude and
	// AnnotationExcludeUntil ("" when absent).
	Exclude, ExcludeUntil string
	// ArgoCDTrackingID is the raw value of AnnotationArgoCDTrackingID
	// (spec.gitOps.argoCD).
	ArgoCDTrackingID string

	// ScaledObjects only: the workload it autoscales and the KEDA pause
	// annotation (nil when absent).
	Target         KindKey
	TargetName     string
	PausedReplicas *string

	// Set by the workload pass before deciding (not read from the object).
	// Excluded: an exclusion annotation or excludeSelector applies.
	Excluded bool
	// Autoscaled: a ScaledObject targets it, so it is parked through the
	// ScaledObject, never directly.
	Autoscaled bool
	// InGrace: it has no recorded original and is younger than
	// spec.gracePeriod, so it is not parked yet.
	InGrace bool
}

// parkKind is the kind spec.kinds must list for the workload to be parked:
// its own, or for a ScaledObject the kind of its target.
func (w Workload) parkKind() KindKey {
	if w.Kind.pauses() {
		return w.Target
	}
	return w.Kind
}

// suspends reports whether the kind is parked by suspending (CronJob) rather
// than scaling to zero.
func (k KindKey) suspends() bool { return k == kindCronJob }

// pauses reports whether the kind is parked by pausing it (a KEDA
// ScaledObject) rather than by scaling it.
func (k KindKey) pauses() bool { return k == kindScaledObject }

// isParked reports whether the workload is in its parked state under
// spec.parkedReplicas n: suspended; paused by KEDA at n or fewer; at
// exactly n replicas.
func (w Workload) isParked(n int32) bool {
	switch {
	case w.Kind.suspends():
		return w.Suspend
	case w.Kind.pauses():
		p, ok := w.pausedAt()
		return ok && p <= n
	}
	return w.Replicas == n
}

// unparked reports whether something brought a parked workload above its
// parked state: resumed, un-paused (or paused above n), scaled above n.
func (w Workload) unparked(n int32) bool {
	switch {
	case w.Kind.suspends():
		return !w.Suspend
	case w.Kind.pauses():
		p, ok := w.pausedAt()
		return !ok || p > n
	}
	return w.Replicas > n
}

// atOrBelow reports whether a workload scaled by its replica count already
// runs n or fewer: parking leaves it as it is. CronJobs and ScaledObjects
// are never left this way (a ScaledObject is paused at its target's count
// instead, see parkCount).
func (w Workload) atOrBelow(n int32) bool {
	return !w.Kind.suspends() && !w.Kind.pauses() && w.Replicas <= n
}

// parkCount is the replica count parking sets under spec.parkedReplicas n:
// n, or for a ScaledObject the lower of n and what its target runs (KEDA
// scales the target to the pause count, so a pause at n would scale up a
// workload that ran fewer). A ScaledObject already paused at n or fewer
// keeps its pause.
func (w Workload) parkCount(n int32) int32 {
	switch {
	case w.Kind.suspends():
		return 0
	case w.Kind.pauses():
		if p, ok := w.pausedAt(); ok && p <= n {
			return p
		}
		return max(min(n, w.Replicas), 0)
	}
	return n
}

// pausedAt is a ScaledObject's KEDA pause count, when it has one that is a
// count.
func (w Workload) pausedAt() (int32, bool) {
	if w.PausedReplicas == nil {
		return 0, false
	}
	p, err := strconv.ParseInt(*w.PausedReplicas, 10, 32)
	if err != nil || p < 0 {
		return 0, false
	}
	return int32(p), true
}

// current records the workload's present state as an original.
func (w Workload) current(by string) Original {
	switch {
	case w.Kind.suspends():
		return SuspendOriginal(w.Suspend, by)
	case w.Kind.pauses():
		return PauseOriginal(w.PausedReplicas, by)
	}
	return ReplicasOriginal(w.Replicas, by)
}

// workloadRef names a workload in errors and events.
func workloadRef(w Workload) string {
	return fmt.Sprintf("%s %s", w.Kind, types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
}
