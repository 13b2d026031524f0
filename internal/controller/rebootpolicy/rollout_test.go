package rebootpolicy

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// rolloutDone and rolloutProgressing read obj on its own, as the throttle
// and the decision do when no stall is known.
func rolloutDone(obj client.Object) bool        { return rolloutPhaseOf(obj).over() }
func rolloutProgressing(obj client.Object) bool { return rolloutPhaseOf(obj).inProgress() }

// stuckDeployment is a Deployment whose controller gave up on the rollout
// of the generation it observed: 1 of 3 replicas on the new template.
func stuckDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 5},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 5, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}},
	}
}

// haltedStatefulSet is a StatefulSet whose update replaced its last pod
// with one that crash-loops: the controller waits for it for ever.
func haltedStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 2,
			Annotations: map[string]string{autorebootv1alpha1.RestartIDAnnotation: "rbp/abc"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2,
			CurrentRevision: "r1", UpdateRevision: "r2"},
	}
}

// A stuck rollout is not in progress for the restart decision and is over
// for the throttle; the restart of a stuck Deployment is in progress for
// both until its controller has observed it (the old condition is about
// the previous generation).
func TestStuckDeploymentIsOneStateForTheDecisionAndTheThrottle(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stuck := stuckDeployment()
	if inspectTarget(stuck, now, nil).progressing {
		t.Error("a Deployment past its progress deadline counts as rolling out: no probe can ever restart it")
	}
	if !rolloutDone(stuck) {
		t.Error("a Deployment past its progress deadline holds its throttle slot")
	}
	restarted := stuck.DeepCopy()
	restarted.Generation = 6
	if !inspectTarget(restarted, now, nil).progressing {
		t.Error("a just restarted Deployment does not count as rolling out")
	}
	if rolloutDone(restarted) {
		t.Error("the restart of a stuck Deployment ends for the throttle before its controller saw it")
	}
}

// TestRolloutPhase is the one definition of a rollout's state, per kind:
// what the decision waits for (inProgress) and when a restart ends for
// the throttle (over).
func TestRolloutPhase(t *testing.T) {
	dep := func(change func(d *appsv1.Deployment)) client.Object {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
		change(d)
		return d
	}
	sts := func(change func(s *appsv1.StatefulSet)) client.Object {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
				CurrentRevision: "r2", UpdateRevision: "r2"}}
		change(s)
		return s
	}
	ds := func(change func(d *appsv1.DaemonSet)) client.Object {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
				UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3}}
		change(d)
		return d
	}
	deadline := []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	cases := []struct {
		name    string
		obj     client.Object
		stalled bool
		want    rolloutPhase
	}{
		{"Deployment rolled out", dep(func(*appsv1.Deployment) {}), false, rolloutComplete},
		{"Deployment spec not observed yet", dep(func(d *appsv1.Deployment) { d.Generation = 3 }), false, rolloutRolling},
		{"Deployment replacing pods", dep(func(d *appsv1.Deployment) { d.Status.UpdatedReplicas, d.Status.Replicas = 1, 4 }), false, rolloutRolling},
		{"Deployment updated, old pods leaving", dep(func(d *appsv1.Deployment) { d.Status.Replicas = 4 }), false, rolloutFinishing},
		{"Deployment updated, crash-looping", dep(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }), false, rolloutFinishing},
		{"Deployment past its progress deadline", dep(func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas, d.Status.Conditions = 1, deadline
		}), false, rolloutStuck},
		{"Deployment past its deadline with every pod updated but unavailable", dep(func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas, d.Status.Conditions = 1, deadline
		}), false, rolloutStuck},
		{"Deployment restarted after it got stuck, not observed yet", dep(func(d *appsv1.Deployment) {
			d.Generation, d.Status.UpdatedReplicas, d.Status.Conditions = 3, 1, deadline
		}), false, rolloutRolling},
		{"Deployment Progressing True is no deadline", dep(func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}
		}), false, rolloutRolling},
		{"StatefulSet rolled out", sts(func(*appsv1.StatefulSet) {}), false, rolloutComplete},
		{"StatefulSet updating", sts(func(s *appsv1.StatefulSet) { s.Status.UpdatedReplicas, s.Status.CurrentRevision = 1, "r1" }), false, rolloutRolling},
		{"StatefulSet update halted past the stall deadline", sts(func(s *appsv1.StatefulSet) {
			s.Status.UpdatedReplicas, s.Status.ReadyReplicas, s.Status.CurrentRevision = 1, 2, "r1"
		}), true, rolloutStuck},
		{"StatefulSet spec not observed: no stall counts", sts(func(s *appsv1.StatefulSet) { s.Generation = 3 }), true, rolloutRolling},
		{"StatefulSet updated, a pod not ready", sts(func(s *appsv1.StatefulSet) { s.Status.AvailableReplicas = 2 }), false, rolloutFinishing},
		{"StatefulSet partition reached", sts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
			s.Status.UpdatedReplicas, s.Status.CurrentRevision = 1, "r1"
		}), false, rolloutComplete},
		{"StatefulSet short of its partition", sts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
			s.Status.UpdatedReplicas, s.Status.CurrentRevision = 1, "r1"
		}), false, rolloutRolling},
		{"DaemonSet rolled out", ds(func(*appsv1.DaemonSet) {}), false, rolloutComplete},
		{"DaemonSet updating", ds(func(d *appsv1.DaemonSet) { d.Status.UpdatedNumberScheduled = 2 }), false, rolloutRolling},
		{"DaemonSet halted past the stall deadline", ds(func(d *appsv1.DaemonSet) { d.Status.UpdatedNumberScheduled = 2 }), true, rolloutStuck},
		{"a Pod is no target", &corev1.Pod{}, true, rolloutComplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := viewOf(tc.obj)
			got := v.phase(ok, tc.obj.GetGeneration(), tc.stalled)
			if got != tc.want {
				t.Fatalf("phase = %d, want %d", got, tc.want)
			}
			// The two readings are one: in progress for the decision is
			// never over for the throttle, and stuck is neither.
			if got.inProgress() && got.over() {
				t.Fatal("in progress for the decision and over for the throttle at once")
			}
		})
	}
}

// TestHaltedStatefulSetIsStuckForBothAfterTheStallDeadline: a StatefulSet
// update halted on a crash-looping pod defers restarts and holds the
// throttle slot of the restart that started it for the stall deadline
// (plus minReadySeconds), then is stuck for both at the same moment; any
// change of its rollout status is progress and restarts the count.
func TestHaltedStatefulSetIsStuckForBothAfterTheStallDeadline(t *testing.T) {
	fc := clocktesting.NewFakeClock(throttleStart)
	th := NewThrottle(1, fc)
	rbp := owner("rbp")
	sts := haltedStatefulSet()
	sts.Spec.MinReadySeconds = 30
	sts.Spec.Template = podTemplateWithStamp(fc.Now())
	if th.Admit(rbp, 1, 0) != 1 {
		t.Fatal("no slot for the restart")
	}
	th.Started(rbp, sts, fc.Now())
	th.observe(sts)
	check := func(step string, wantStuck bool) {
		t.Helper()
		progressing := inspectTarget(sts, fc.Now(), th.rolloutStalls()).progressing
		held := th.InProgress() == 1
		if progressing == wantStuck || held == wantStuck {
			t.Fatalf("%s: decision waits %v, throttle holds the slot %v; want both %v", step, progressing, held, !wantStuck)
		}
	}
	check("halted just now", false)
	fc.Step(stallDeadline)
	check("halted for the stall deadline, within minReadySeconds", false)
	fc.Step(29 * time.Second)
	// A pod became ready for a moment: progress, the count starts again.
	sts = sts.DeepCopy()
	sts.Status.ReadyReplicas = 3
	th.observe(sts)
	fc.Step(stallDeadline)
	check("stood still again, not yet for the whole deadline", false)
	fc.Step(30 * time.Second)
	check("stood still for the stall deadline and minReadySeconds", true)

	// Restarted again: the stall before it says nothing about the new
	// rollout, even before the informer shows the patch.
	if th.Admit(rbp, 1, 0) != 1 {
		t.Fatal("the stuck restart still holds the slot")
	}
	th.Started(rbp, sts, fc.Now())
	fc.Step(time.Second)
	if th.InProgress() != 1 {
		t.Fatal("a stall seen before a restart ended the restart")
	}
	sts = sts.DeepCopy()
	sts.Generation = 3
	th.observe(sts)
	check("the new restart, not observed yet", false)
	sts = sts.DeepCopy()
	sts.Status.ObservedGeneration = 3
	th.observe(sts)
	fc.Step(stallDeadline + 30*time.Second)
	check("the new restart halted too", true)
	// Done: the tracker keeps nothing for a finished rollout.
	sts = sts.DeepCopy()
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		CurrentRevision: "r3", UpdateRevision: "r3"}
	th.observe(sts)
	if n := len(th.stalls.marks); n != 0 {
		t.Fatalf("the tracker holds %d marks after the rollout finished", n)
	}
}
