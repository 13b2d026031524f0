package nsscaler

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/internal/savings"
)

// The cache holds built-in workloads compacted; the controller reads the
// same Workload from them as from the full objects.
func TestCompactWorkloadReadsTheSame(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "u", ResourceVersion: "5", Generation: 2,
			Labels:          map[string]string{"app": "w"},
			Annotations:     map[string]string{AnnotationOriginal: ReplicasOriginal(3, "me").Encode(), "other": "dropped"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "X", Name: "x", UID: "o", Controller: ptr.To(false)}}}
	}
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	for _, tt := range []struct {
		name string
		obj  client.Object
		h    *builtinHandler
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Template: template}}, newDeploymentHandler(workloadAccess{})},
		{"deployment without replicas (the default)", &appsv1.Deployment{ObjectMeta: meta()}, newDeploymentHandler(workloadAccess{})},
		{"parked deployment", &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}}, newDeploymentHandler(workloadAccess{})},
		{"statefulset", &appsv1.StatefulSet{ObjectMeta: meta(), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: template}}, newStatefulSetHandler(workloadAccess{})},
		{"suspended cronjob", &batchv1.CronJob{ObjectMeta: meta(), Spec: batchv1.CronJobSpec{Suspend: ptr.To(true), Schedule: "* * * * *"}}, newCronJobHandler(workloadAccess{})},
		{"cronjob without suspend", &batchv1.CronJob{ObjectMeta: meta()}, newCronJobHandler(workloadAccess{})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			trimmed, _ := trimObject(tt.obj.DeepCopyObject())
			want := tt.h.toWorkload(trimmed.(client.Object))
			out, err := trimAndShareMaps(newMapInterner(), newMapInterner())(tt.obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			c, ok := out.(*cachedWorkload)
			if !ok {
				t.Fatalf("cached as %T, want *cachedWorkload", out)
			}
			if got := tt.h.toWorkload(c); !equalWorkloads(got, want) {
				t.Errorf("read %+v from the cache, want %+v", got, want)
			}
			if again := compactWorkload(c, savings.Requests{}); again != any(c) {
				t.Error("compacting a compacted workload must return it as is")
			}
			if cp := c.DeepCopyObject().(*cachedWorkload); !equalWorkloads(tt.h.toWorkload(cp), want) {
				t.Errorf("deep copy %+v differs", cp)
			}
		})
	}
}

func equalWorkloads(a, b Workload) bool { return reflect.DeepEqual(a, b) }
