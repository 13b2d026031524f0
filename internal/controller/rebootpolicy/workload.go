package rebootpolicy

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// the replicas it wants, those that exist, those on the latest
	// template, ready and available.
	observed                                  int64
	want, replicas, updated, ready, available int32
	// partition: a StatefulSet's RollingUpdate partition (the replicas
	// below it stay on the old template by design).
	partition int32
	// minReady: spec.minReadySeconds, added to the stall deadline.
	minReady int32
	// settled: no replica of an older template is left (Deployment: no
	// surplus pod; StatefulSet: the current revision is the update
	// revision, or the partition is reached; a DaemonSet replaces in place).
	settled bool
	// deadlineExceeded: a Deployment's Progressing condition says
	// ProgressDeadlineExceeded (about the generation it observed), or a
	// Rollout is Degraded (timed out, aborted, invalid).
	deadlineExceeded bool
	// stamp is the restartedAt value of the target's last restart: the
	// template annotation, a Rollout's spec.restartAt.
	stamp string
	// restarting: a Rollout's spec.restartAt is not yet acknowledged by
	// status.restartedAt (its controller is still replacing pods).
	restarting bool
	// halted: a Rollout paused by a human or at a step of its own: it
	// waits for someone, not for time.
	halted bool
}

// workloads is how referenced triggers read targets (probe.Workloads).

// Its reader reads what a Rollout's workloadRef names (nil: nothing).
type workloads struct{ reader client.Reader }

func (workloads) NewObject(kind autorebootv1alpha1.TargetKind) client.Object {
	return newTargetObject(kind)
}
func (workloads) NewList(kind autorebootv1alpha1.TargetKind) client.ObjectList {
	return newTargetList(kind)
}

func (w workloads) PodSpec(obj client.Object) *corev1.PodSpec {
	if u, ok := asRollout(obj); ok {
		return &rolloutTemplate(u, w.reader).Spec
	}
	v, _ := viewOf(obj)
	return &v.template.Spec
}

// TemplateVersion changes whenever PodSpec may.
func (w workloads) TemplateVersion(obj client.Object) string {
	if u, ok := asRollout(obj); ok {
		return rolloutTemplateVersion(u, w.reader)
	}
	return strconv.FormatInt(obj.GetGeneration(), 10)
}

// viewOf reads obj; ok is false for any other type (then nothing is a
// target kind and the zero view answers).
func viewOf(obj client.Object) (v workloadView, ok bool) {
	v, ok = viewOfKind(obj)
	if ok && v.kind != autorebootv1alpha1.KindRollout {
		v.stamp = v.template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	}
	return v, ok
}

func viewOfKind(obj client.Object) (v workloadView, ok bool) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if isRollout(o) {
			return rolloutView(o), true
		}
	case *appsv1.Deployment:
		want := ptr.Deref(o.Spec.Replicas, 1)
		return workloadView{kind: autorebootv1alpha1.KindDeployment, template: &o.Spec.Template, paused: o.Spec.Paused,
			observed: o.Status.ObservedGeneration, want: want, replicas: o.Status.Replicas, updated: o.Status.UpdatedReplicas,
			ready: o.Status.ReadyReplicas, available: o.Status.AvailableReplicas, minReady: o.Spec.MinReadySeconds,
			settled: o.Status.Replicas == want, deadlineExceeded: deadlineExceeded(o)}, true
	case *appsv1.StatefulSet:
		want := ptr.Deref(o.Spec.Replicas, 1)
		var partition int32
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			partition = min(max(ptr.Deref(ru.Partition, 0), 0), want)
		}
		return workloadView{kind: autorebootv1alpha1.KindStatefulSet, template: &o.Spec.Template,
			onDelete: o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType,
			observed: o.Status.ObservedGeneration, want: want, replicas: o.Status.Replicas, updated: o.Status.UpdatedReplicas,
			ready: o.Status.ReadyReplicas, available: o.Status.AvailableReplicas, partition: partition, minReady: o.Spec.MinReadySeconds,
			settled: o.Status.CurrentRevision == o.Status.UpdateRevision || (partition > 0 && o.Status.UpdatedReplicas >= want-partition)}, true
	case *appsv1.DaemonSet:
		return workloadView{kind: autorebootv1alpha1.KindDaemonSet, template: &o.Spec.Template,
			onDelete: o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType,
			observed: o.Status.ObservedGeneration, want: o.Status.DesiredNumberScheduled, replicas: o.Status.CurrentNumberScheduled,
			updated: o.Status.UpdatedNumberScheduled, ready: o.Status.NumberReady, available: o.Status.NumberAvailable,
			minReady: o.Spec.MinReadySeconds, settled: true}, true
	}
	return workloadView{template: &corev1.PodTemplateSpec{}}, false
}

func deadlineExceeded(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// wantUpdated is how many replicas the rollout puts on the latest
// template: all of them, but a StatefulSet's partition keeps the ones
// below it on the old one.
func (v workloadView) wantUpdated() int32 { return v.want - v.partition }
