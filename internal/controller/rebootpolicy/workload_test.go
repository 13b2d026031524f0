package rebootpolicy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Every reader of a target goes through viewOf: each kind's fields land
// where the decision, the throttle and the reference watch look, and any
// other object is no target at all.
func TestViewOfReadsEachKind(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{ServiceAccountName: "sa"}}
	meta := metav1.ObjectMeta{Name: "w", Generation: 4}
	for _, tc := range []struct {
		name            string
		obj             client.Object
		want            workloadView
		wantOK          bool
		progressing     bool
		done            bool
		wantPodSpecOfSA string
	}{
		{name: "a paused Deployment mid-rollout, past its deadline",
			obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Paused: true, Template: tmpl},
				Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 4, UpdatedReplicas: 2, AvailableReplicas: 3,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}},
			want:   workloadView{kind: autorebootv1alpha1.KindDeployment, paused: true, observed: 4, want: 3, replicas: 4, updated: 2, available: 3, deadlineExceeded: true},
			wantOK: true, progressing: false, done: true, wantPodSpecOfSA: "sa"},
		{name: "a Deployment of the default size, rolled out",
			obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl},
				Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}},
			want:   workloadView{kind: autorebootv1alpha1.KindDeployment, observed: 4, want: 1, replicas: 1, updated: 1, available: 1, settled: true},
			wantOK: true, done: true, wantPodSpecOfSA: "sa"},
		{name: "an OnDelete StatefulSet on an older revision",
			obj: &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: tmpl,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
				Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, UpdatedReplicas: 2, AvailableReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r2"}},
			want:   workloadView{kind: autorebootv1alpha1.KindStatefulSet, onDelete: true, observed: 3, want: 2, updated: 2, available: 2},
			wantOK: true, progressing: true, wantPodSpecOfSA: "sa"},
		{name: "a DaemonSet that replaced every pod",
			obj: &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl},
				Status: appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 5, CurrentNumberScheduled: 5, UpdatedNumberScheduled: 5, NumberReady: 5, NumberAvailable: 5}},
			want:   workloadView{kind: autorebootv1alpha1.KindDaemonSet, observed: 4, want: 5, replicas: 5, updated: 5, ready: 5, available: 5, settled: true},
			wantOK: true, done: true, wantPodSpecOfSA: "sa"},
		{name: "a Pod is not a target",
			obj:  &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{ServiceAccountName: "pod-sa"}},
			done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := viewOf(tc.obj)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && got.template.Annotations["a"] != "b" {
				t.Errorf("template %v is not the object's", got.template)
			}
			got.template = nil
			if got != tc.want {
				t.Errorf("view\n%+v, want\n%+v", got, tc.want)
			}
			if rolloutProgressing(tc.obj) != tc.progressing || rolloutDone(tc.obj) != tc.done {
				t.Errorf("progressing %v done %v, want %v %v", rolloutProgressing(tc.obj), rolloutDone(tc.obj), tc.progressing, tc.done)
			}
			if (workloads{}).PodSpec(tc.obj).ServiceAccountName != tc.wantPodSpecOfSA {
				t.Errorf("podSpecOf %q, want %q", (workloads{}).PodSpec(tc.obj).ServiceAccountName, tc.wantPodSpecOfSA)
			}
		})
	}
}
