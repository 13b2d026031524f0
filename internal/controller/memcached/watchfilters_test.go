package memcached

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestUpdateFilters(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", Generation: 1, ResourceVersion: "1", Labels: map[string]string{"a": "b"}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}}
	withDep := func(f func(*appsv1.Deployment)) client.Object {
		d := dep.DeepCopy()
		d.ResourceVersion = "2"
		f(d)
		return d
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "mc", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	withPDB := func(f func(*policyv1.PodDisruptionBudget)) client.Object { p := pdb.DeepCopy(); f(p); return p }
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mc"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
	withSvc := func(f func(*corev1.Service)) client.Object { s := svc.DeepCopy(); f(s); return s }
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "mc-x"}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
	withSlice := func(f func(*discoveryv1.EndpointSlice)) client.Object { s := slice.DeepCopy(); f(s); return s }

	tests := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{name: "Deployment: resourceVersion only", old: dep, new: withDep(func(*appsv1.Deployment) {})},
		{name: "Deployment: unavailableReplicas and a condition heartbeat", old: dep, new: withDep(func(d *appsv1.Deployment) {
			d.Status.UnavailableReplicas = 1
			d.Status.Conditions[0].LastUpdateTime = metav1.Now()
		})},
		{name: "Deployment: ready replicas", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }), want: true},
		{name: "Deployment: available replicas", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 }), want: true},
		{name: "Deployment: observed generation", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 2 }), want: true},
		{name: "Deployment: spec (generation)", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Generation = 2 }), want: true},
		{name: "Deployment: labels", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Labels = nil }), want: true},
		{name: "Deployment: annotations", old: dep, new: withDep(func(d *appsv1.Deployment) { d.Annotations = map[string]string{"x": "y"} }), want: true},
		{name: "Deployment: owner", old: dep, new: withDep(func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }), want: true},
		{name: "Deployment: deleted", old: dep, new: withDep(func(d *appsv1.Deployment) { d.DeletionTimestamp = ptr.To(metav1.Now()) }), want: true},
		{name: "Deployment: progress deadline exceeded", old: dep, new: withDep(func(d *appsv1.Deployment) {
			d.Status.Conditions[0] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "stuck"}
		}), want: true},
		{name: "Deployment: replica failure", old: dep, new: withDep(func(d *appsv1.Deployment) {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Message: "quota"})
		}), want: true},
		{name: "PDB: disruption counts", old: pdb, new: withPDB(func(p *policyv1.PodDisruptionBudget) {
			p.Status.CurrentHealthy, p.Status.DisruptionsAllowed = 2, 1
		})},
		{name: "PDB: spec", old: pdb, new: withPDB(func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2)) }), want: true},
		{name: "Service: status", old: svc, new: withSvc(func(s *corev1.Service) {
			s.Status.Conditions = []metav1.Condition{{Type: "x"}}
		})},
		{name: "Service: spec", old: svc, new: withSvc(func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Port: 1}} }), want: true},
		{name: "EndpointSlice: unchanged endpoints", old: slice, new: withSlice(func(s *discoveryv1.EndpointSlice) { s.ResourceVersion = "9" })},
		{name: "EndpointSlice: endpoint ready", old: slice, new: withSlice(func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Conditions.Ready = ptr.To(true)
		}), want: true},
		{name: "EndpointSlice: ports", old: slice, new: withSlice(func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](1)}}
		}), want: true},
	}
	filters := map[string]func(e event.UpdateEvent) bool{
		"Deployment":    ownedFilter(deploymentChanged).Update,
		"PDB":           ownedFilter(pdbChanged).Update,
		"Service":       ownedFilter(serviceChanged).Update,
		"EndpointSlice": watchFilter(endpointSliceChanged, sliceListsEndpoints).Update,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, _, _ := strings.Cut(tt.name, ":")
			if got := filters[kind](event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
				t.Fatalf("update passes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilterCreations(t *testing.T) {
	owner := func(kind, apiVersion, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: name, Controller: ptr.To(true)}}
	}
	mcAPI := "cache.runbook.dev/v1alpha1"
	tests := []struct {
		name string
		obj  client.Object
		want bool
	}{
		{name: "a Deployment of the Memcached of its name (the controller's own)", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", OwnerReferences: owner("Memcached", mcAPI, "mc")}}},
		{name: "a foreign Deployment", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc"}}, want: true},
		{name: "a Deployment of another owner", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", OwnerReferences: owner("Rollout", "argoproj.io/v1alpha1", "mc")}}, want: true},
		{name: "a Deployment of a Memcached of another group", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", OwnerReferences: owner("Memcached", "other.dev/v1", "mc")}}, want: true},
		{name: "a Deployment of a Memcached of another name", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mc", OwnerReferences: owner("Memcached", mcAPI, "other")}}, want: true},
		{name: "an object of another type", obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mc", OwnerReferences: owner("Memcached", mcAPI, "mc")}}, want: true},
	}
	p := ownedFilter(deploymentChanged)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Create(event.CreateEvent{Object: tt.obj}); got != tt.want {
				t.Fatalf("creation passes = %v, want %v", got, tt.want)
			}
		})
	}
	slices := watchFilter(endpointSliceChanged, sliceListsEndpoints)
	if slices.Create(event.CreateEvent{Object: &discoveryv1.EndpointSlice{}}) {
		t.Error("an empty new EndpointSlice must not pass")
	}
	if !slices.Create(event.CreateEvent{Object: &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{}}}}) {
		t.Error("a new EndpointSlice with endpoints must pass")
	}
	d := &appsv1.Deployment{}
	if !p.Delete(event.DeleteEvent{Object: d}) || !p.Generic(event.GenericEvent{Object: d}) {
		t.Error("deletions and generic events must pass")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: &corev1.Service{}, ObjectNew: &corev1.Service{}}) {
		t.Error("an update of another type must pass")
	}
}

func TestSliceService(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "the EndpointSlice controller's", labels: map[string]string{discoveryv1.LabelManagedBy: endpointSliceControllerName, discoveryv1.LabelServiceName: "mc"}, want: []string{"mc"}},
		{name: "hand-made", labels: map[string]string{discoveryv1.LabelManagedBy: "someone", discoveryv1.LabelServiceName: "mc"}},
		{name: "no Service", labels: map[string]string{discoveryv1.LabelManagedBy: endpointSliceControllerName}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sliceService(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}})
			if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
				t.Fatalf("sliceService = %v, want %v", got, tt.want)
			}
		})
	}
}
