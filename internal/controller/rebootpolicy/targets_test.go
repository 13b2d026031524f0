package rebootpolicy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// finishedDeployment is a Deployment of 2 replicas whose last rollout finished.
func finishedDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "t", Generation: 3,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "1"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2,
			ReadyReplicas: 2, AvailableReplicas: 2},
	}
}

func TestTargetDecisionChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{"nothing", func(*appsv1.Deployment) {}, false},
		{"a pod became unready", func(d *appsv1.Deployment) { d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1 }, false},
		{"an old pod left during a rollout", func(d *appsv1.Deployment) { d.Status.Replicas = 3 }, false},
		{"resourceVersion only", func(d *appsv1.Deployment) { d.ResourceVersion = "9" }, false},
		{"spec changed (a restart patch)", func(d *appsv1.Deployment) { d.Generation = 4 }, true},
		{"a rollout started", func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 }, true},
		{"labels changed (selector membership)", func(d *appsv1.Deployment) { d.Labels = map[string]string{"app": "db"} }, true},
		{"annotations changed (restart id)", func(d *appsv1.Deployment) { d.Annotations["a"] = "2" }, true},
		{"deletion started", func(d *appsv1.Deployment) { d.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := finishedDeployment()
			updated := old.DeepCopy()
			tc.change(updated)
			if got := targetDecisionChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("passed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTargetDecisionChangedSeesARolloutEnd: the update that ends a rollout
// reaches the policies (a restart held by the rollout waits for it), the
// status writes between its start and end do not.
func TestTargetDecisionChangedSeesARolloutEnd(t *testing.T) {
	steps := []func(d *appsv1.Deployment){
		func(d *appsv1.Deployment) { d.Generation = 4 },                                             // restart patch
		func(d *appsv1.Deployment) { d.Status.ObservedGeneration, d.Status.UpdatedReplicas = 4, 0 }, // observed
		func(d *appsv1.Deployment) { d.Status.UpdatedReplicas, d.Status.Replicas = 1, 3 },           // surge
		func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 2 },                                 // all updated
		func(d *appsv1.Deployment) {
			d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 2, 2, 2
		}, // old pods gone
	}
	want := []bool{true, false, false, true, false}
	cur := finishedDeployment()
	for i, step := range steps {
		next := cur.DeepCopy()
		step(next)
		if got := targetDecisionChanged().Update(event.UpdateEvent{ObjectOld: cur, ObjectNew: next}); got != want[i] {
			t.Errorf("step %d: passed = %v, want %v", i, got, want[i])
		}
		cur = next
	}
}

func TestRolloutProgressing(t *testing.T) {
	for _, tc := range []struct {
		obj  client.Object
		want bool
	}{
		{finishedDeployment(), false},
		{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: appsv1.StatefulSetStatus{ObservedGeneration: 1}}, true},
		{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdatedReplicas: 3}}, false},
		{&appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 2}}, true},
		{&appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3}}, false},
	} {
		if got := rolloutProgressing(tc.obj); got != tc.want {
			t.Errorf("%T %+v: progressing = %v, want %v", tc.obj, tc.obj, got, tc.want)
		}
	}
}
