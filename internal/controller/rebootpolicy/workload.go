package rebootpolicy

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// workloadView is what the controller reads of a target, whichever of the
// three kinds it is: the one place that knows their shapes, so that a
// decision, the throttle and the reference watch cannot disagree on them.
type workloadView struct {
	kind     autorebootv1alpha1.TargetKind
	template *corev1.PodTemplateSpec
	// paused: a paused Deployment; onDelete: an OnDelete update strategy
	// (a template change rolls nothing).
	paused, onDelete bool
	// The rollout: the generation the workload controller has observed,
	// the replicas it wants, those on the latest template and those
	// available.
	observed                 int64
	want, updated, available int32
	// settled: no replica of an older template is left (Deployment: no
	// surplus pod; StatefulSet: the current revision is the update
	// revision; a DaemonSet replaces in place).
	settled bool
	// gaveUp: a Deployment past its progress deadline.
	gaveUp bool
}

// viewOf reads obj; ok is false for any other type (then nothing is a
// target kind and the zero view answers).
func viewOf(obj client.Object) (v workloadView, ok bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		want := ptr.Deref(o.Spec.Replicas, 1)
		return workloadView{kind: autorebootv1alpha1.KindDeployment, template: &o.Spec.Template, paused: o.Spec.Paused,
			observed: o.Status.ObservedGeneration, want: want, updated: o.Status.UpdatedReplicas,
			available: o.Status.AvailableReplicas, settled: o.Status.Replicas == want, gaveUp: deadlineExceeded(o)}, true
	case *appsv1.StatefulSet:
		return workloadView{kind: autorebootv1alpha1.KindStatefulSet, template: &o.Spec.Template,
			onDelete: o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType,
			observed: o.Status.ObservedGeneration, want: ptr.Deref(o.Spec.Replicas, 1), updated: o.Status.UpdatedReplicas,
			available: o.Status.AvailableReplicas, settled: o.Status.CurrentRevision == o.Status.UpdateRevision}, true
	case *appsv1.DaemonSet:
		return workloadView{kind: autorebootv1alpha1.KindDaemonSet, template: &o.Spec.Template,
			onDelete: o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType,
			observed: o.Status.ObservedGeneration, want: o.Status.DesiredNumberScheduled, updated: o.Status.UpdatedNumberScheduled,
			available: o.Status.NumberAvailable, settled: true}, true
	}
	return workloadView{template: &corev1.PodTemplateSpec{}}, false
}

func deadlineExceeded(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// progressing: the workload controller has not observed the latest
// generation, or fewer replicas than it wants run the latest template.
func (v workloadView) progressing(generation int64) bool {
	return v.observed < generation || v.updated < v.want
}

// done: the latest template is observed, every replica runs it and all of
// them are available again with no older one left — or a Deployment gave
// up. Until then a restart of it counts as in progress for the throttle.
func (v workloadView) done(generation int64) bool {
	return v.gaveUp || (v.observed >= generation && v.updated == v.want && v.available >= v.want && v.settled)
}
