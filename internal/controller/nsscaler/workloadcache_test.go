package nsscaler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
			if len(m.GetAnnotations()) != 1 || !reflect.DeepEqual(m.GetLabels(), map[string]string{"app": "web"}) || m.GetManagedFields() != nil {
				t.Fatalf("kept annotations %v labels %v managedFields %v", m.GetAnnotations(), m.GetLabels(), m.GetManagedFields())
			}
		})
	}
	ns, _ := trimObject(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "dev"}, Annotations: map[string]string{"a": "b"}}})
	if got := ns.(*corev1.Namespace); got.Labels["env"] != "dev" || got.Annotations != nil {
		t.Fatalf("namespace trimmed to %+v; labels must stay (selectors read them)", got.ObjectMeta)
	}
}

// A workload's editors control its annotations and labels: the cache keeps
// no more of them than a valid value needs.
func TestTrimObjectBoundsWhatTenantsWrite(t *testing.T) {
	huge := strings.Repeat("9", 100_000)
	labels := map[string]string{}
	for i := range maxWorkloadLabels + 1 {
		labels[fmt.Sprintf("l%d", i)] = "v"
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels, Annotations: map[string]string{
		AnnotationOriginal: huge, AnnotationExclude: huge, AnnotationExcludeUntil: huge, "other": huge,
	}}}
	out, _ := trimObject(d)
	m := out.(*appsv1.Deployment)
	if len(m.Annotations) != 3 || len(m.Annotations[AnnotationOriginal]) != maxOriginalLength+1 || len(m.Annotations[AnnotationExclude]) != maxExclusionValue+1 {
		t.Fatalf("annotations kept: %d, original %d bytes", len(m.Annotations), len(m.Annotations[AnnotationOriginal]))
	}
	if !reflect.DeepEqual(m.Labels, map[string]string{labelsTrimmed: ""}) {
		t.Fatalf("labels kept: %d", len(m.Labels))
	}
	w := newDeploymentHandler(workloadAccess{}).toWorkload(m)
	if _, err := DecodeOriginal(w.Annotation); err == nil {
		t.Fatal("a cut original decodes")
	}
	sel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"l1": "v"}})
	if ex := excludedBy(w, sel, fakeNow); ex.excluded || ex.err == nil {
		t.Fatalf("exclusion of a cut workload: %+v", ex)
	}
}

func TestTrimObjectScaledObject(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"name": "so", "namespace": "ns", "annotations": map[string]any{
			AnnotationKEDAPausedReplicas: "2", "kubectl.kubernetes.io/last-applied-configuration": "{}",
		}},
		"spec":   map[string]any{"scaleTargetRef": map[string]any{"name": "web"}, "triggers": []any{map[string]any{"type": "cron"}}},
		"status": map[string]any{"hpaName": "keda-hpa-so"},
	}}
	out, _ := trimObject(u)
	got := out.(*unstructured.Unstructured)
	want := map[string]any{"scaleTargetRef": map[string]any{"name": "web"}}
	if !reflect.DeepEqual(got.Object["spec"], want) || got.Object["status"] != nil || len(got.GetAnnotations()) != 1 {
		t.Fatalf("trimmed to %v", got.Object)
	}
	w := (&scaledObjectHandler{}).toWorkload(got)
	if w.Target != kindDeployment || w.TargetName != "web" || w.PausedReplicas == nil || *w.PausedReplicas != "2" || w.isParked(0) {
		t.Fatalf("read %+v", w)
	}
}

// Workloads with the same labels, or the same kept annotations, share one
// map in the cache; different ones do not, whatever bytes the values hold,
// and the table starts over when full.
func TestLabelsAndAnnotationsAreShared(t *testing.T) {
	trim := trimAndShareMaps(newMapInterner(), newMapInterner())
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	labelled := func(app string, ann map[string]string) metav1.Object {
		out, err := trim(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app,
			Labels: map[string]string{"app": app, "tier": "web"}, Annotations: ann}})
		if err != nil {
			t.Fatal(err)
		}
		return out.(metav1.Object)
	}
	parked := func(orig string) map[string]string {
		return map[string]string{AnnotationOriginal: orig, "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	}
	a1, a2, b := labelled("a", parked(`{"replicas":1}`)), labelled("a", parked(`{"replicas":1}`)), labelled("b", parked(`{"replicas":2}`))
	if !same(a1.GetLabels(), a2.GetLabels()) || !same(a1.GetAnnotations(), a2.GetAnnotations()) {
		t.Fatal("two Deployments with the same labels and original keep their own maps")
	}
	if same(a1.GetLabels(), b.GetLabels()) || b.GetLabels()["app"] != "b" {
		t.Fatalf("different labels share a map: %v %v", a1.GetLabels(), b.GetLabels())
	}
	if same(a1.GetAnnotations(), b.GetAnnotations()) || b.GetAnnotations()[AnnotationOriginal] != `{"replicas":2}` {
		t.Fatalf("different originals share a map: %v %v", a1.GetAnnotations(), b.GetAnnotations())
	}
	// A tenant's value that spells out another map's rendering must not be
	// handed that map (nor hand it its own).
	victim := labelled("v", map[string]string{AnnotationExclude: "x", AnnotationExcludeUntil: "2030-01-01T00:00:00Z"})
	forged := labelled("f", map[string]string{AnnotationExclude: "x\x00" + AnnotationExcludeUntil + "\x002030-01-01T00:00:00Z"})
	if same(victim.GetAnnotations(), forged.GetAnnotations()) || victim.GetAnnotations()[AnnotationExcludeUntil] == "" {
		t.Fatalf("a forged value shares a map: %v %v", victim.GetAnnotations(), forged.GetAnnotations())
	}
	in := newMapInterner()
	for i := range maxInternedMaps + 10 {
		in.share(map[string]string{"i": fmt.Sprint(i)})
	}
	if len(in.maps) > maxInternedMaps {
		t.Fatalf("%d maps held", len(in.maps))
	}
	for _, pair := range [][2]map[string]string{
		{{"a": "b=c"}, {"a=b": "c"}},
		{{"a": "1:b"}, {"a1": ":b"}},
		{{"a": "x\x00b\x00y"}, {"a": "x", "b": "y"}},
	} {
		if mapKey(pair[0]) == mapKey(pair[1]) {
			t.Fatalf("%v and %v render the same", pair[0], pair[1])
		}
	}
}
