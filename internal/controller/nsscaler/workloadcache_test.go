package nsscaler

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestTrimObjectKeepsWhatTheControllerReads(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"a very":"long copy"}`,
				AnnotationOriginal: ReplicasOriginal(3, "s").Encode(),
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "X", Name: "x", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}
	}
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	tests := []struct {
		name string
		in   any
		want Workload
		read func(any) Workload
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Template: template,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}, Status: appsv1.DeploymentStatus{Replicas: 3}},
			Workload{Kind: kindDeployment, Replicas: 0}, func(o any) Workload { return newDeploymentHandler(workloadAccess{}).toWorkload(o.(*appsv1.Deployment)) }},
		{"statefulset", &appsv1.StatefulSet{ObjectMeta: meta(), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: template}},
			Workload{Kind: kindStatefulSet, Replicas: 2}, func(o any) Workload {
				return newStatefulSetHandler(workloadAccess{}).toWorkload(o.(*appsv1.StatefulSet))
			}},
		{"cronjob", &batchv1.CronJob{ObjectMeta: meta(), Spec: batchv1.CronJobSpec{Schedule: "* * * * *", Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}},
			Workload{Kind: kindCronJob, Suspend: true}, func(o any) Workload { return newCronJobHandler(workloadAccess{}).toWorkload(o.(*batchv1.CronJob)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.read(tt.in)
			out, err := trimObject(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			after := tt.read(out)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("trimming changed what the controller reads:\nbefore %+v\nafter  %+v", before, after)
			}
			if after.Replicas != tt.want.Replicas || after.Suspend != tt.want.Suspend || !after.Controlled || !after.HasAnnotation {
				t.Fatalf("read %+v", after)
			}
			m := out.(metav1.Object)
			if len(m.GetAnnotations()) != 1 || m.GetLabels() != nil || m.GetManagedFields() != nil {
				t.Fatalf("kept annotations %v labels %v managedFields %v", m.GetAnnotations(), m.GetLabels(), m.GetManagedFields())
			}
		})
	}
	ns, _ := trimObject(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "dev"}, Annotations: map[string]string{"a": "b"}}})
	if got := ns.(*corev1.Namespace); got.Labels["env"] != "dev" || got.Annotations != nil {
		t.Fatalf("namespace trimmed to %+v; labels must stay (selectors read them)", got.ObjectMeta)
	}
}
