package nsscaler

import (
	"k8s.io/apimachinery/pkg/types"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
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
	// Replicas is the desired replica count (scalable kinds).
	Replicas int32
	// Suspend is the CronJob's suspend flag.
	Suspend bool
	// Annotation is the raw value of AnnotationOriginal, when present.
	Annotation    string
	HasAnnotation bool
	// Controlled is true when an owner reference has controller: true.
	Controlled bool
}

// suspends reports whether the kind is parked by suspending (CronJob) rather
// than scaling to zero.
func (k KindKey) suspends() bool { return k == kindCronJob }

// isParked reports whether the workload is in its parked state.
func (w Workload) isParked() bool {
	if w.Kind.suspends() {
		return w.Suspend
	}
	return w.Replicas == 0
}

// current records the workload's present state as an original.
func (w Workload) current(by string) Original {
	if w.Kind.suspends() {
		return SuspendOriginal(w.Suspend, by)
	}
	return ReplicasOriginal(w.Replicas, by)
}
