package memcached

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// recordingPriorityQueue records the priority each request is added with
// (the rest of the interface is not expected to be called).
type recordingPriorityQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added map[reconcile.Request]int
}

func (q *recordingPriorityQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q *recordingPriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, it := range items {
		q.added[it] = ptr.Deref(o.Priority, 0)
	}
}

func (q *recordingPriorityQueue) GetWithPriority() (reconcile.Request, int, bool) {
	panic("not expected to be called")
}

// The watches' handlers give each event the priority of what it means to
// the status: readiness news (a workload's replica counts, a slice's ready
// endpoints) ahead of the creations and spec work at the default
// priority, the initial list and resyncs low.
func TestWatchHandlersPutStatusNewsFirst(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "sessions"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)), nil)
	h := r.handlers()

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 1, ResourceVersion: "1"},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}}
	withDep := func(f func(*appsv1.Deployment)) *appsv1.Deployment {
		d := dep.DeepCopy()
		d.ResourceVersion = "2"
		f(d)
		return d
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 1, ResourceVersion: "1"},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}}
	withSts := func(f func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := sts.DeepCopy()
		s.ResourceVersion = "2"
		f(s)
		return s
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-x", ResourceVersion: "1", Labels: map[string]string{
			discoveryv1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: endpointSliceControllerName, labelManagedBy: managedByValue}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(cachev1alpha1.MemcachedPortName), Port: ptr.To[int32](11211)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	withSlice := func(f func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
		s := slice.DeepCopy()
		s.ResourceVersion = "2"
		f(s)
		return s
	}
	notReady := withSlice(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Ready = ptr.To(false) })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "1"}}
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "1"}}

	const (
		news = status.NewsPriority
		def  = status.DefaultPriority
		low  = handler.LowPriority
	)
	for _, tc := range []struct {
		name     string
		h        handler.EventHandler
		old, obj client.Object // old only for updates
		delete   bool
		initial  bool
		want     int
	}{
		{name: "a new Memcached (For's own handler)", h: &handler.EnqueueRequestForObject{}, obj: mc, want: def},
		{name: "Deployment: ready replicas", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }), want: news},
		{name: "Deployment: available replicas", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 }), want: news},
		{name: "Deployment: updated replicas", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 }), want: news},
		{name: "Deployment: observed generation", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 2 }), want: news},
		{name: "Deployment: spec drift (generation)", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Generation = 2 }), want: def},
		{name: "Deployment: labels", h: h.deployment, old: dep, obj: withDep(func(d *appsv1.Deployment) { d.Labels = map[string]string{"x": "y"} }), want: def},
		{name: "Deployment: resync", h: h.deployment, old: dep, obj: dep, want: low},
		{name: "Deployment: foreign one created", h: h.deployment, obj: dep, want: def},
		{name: "Deployment: in the initial list", h: h.deployment, obj: dep, initial: true, want: low},
		{name: "Deployment: deleted", h: h.deployment, obj: dep, delete: true, want: def},
		{name: "StatefulSet: ready replicas", h: h.statefulSet, old: sts, obj: withSts(func(s *appsv1.StatefulSet) { s.Status.ReadyReplicas = 2 }), want: news},
		{name: "StatefulSet: spec drift (generation)", h: h.statefulSet, old: sts, obj: withSts(func(s *appsv1.StatefulSet) { s.Generation = 2 }), want: def},
		{name: "EndpointSlice: created with a ready endpoint", h: h.slice, obj: slice, want: news},
		{name: "EndpointSlice: created with no ready endpoint", h: h.slice, obj: notReady, want: def},
		{name: "EndpointSlice: in the initial list", h: h.slice, obj: slice, initial: true, want: low},
		{name: "EndpointSlice: an endpoint turns ready", h: h.slice, old: slice,
			obj: withSlice(func(s *discoveryv1.EndpointSlice) { s.Endpoints[1].Conditions.Ready = ptr.To(true) }), want: news},
		{name: "EndpointSlice: an endpoint turns not ready", h: h.slice, old: slice, obj: notReady, want: news},
		{name: "EndpointSlice: a not-ready endpoint changes", h: h.slice, old: slice,
			obj: withSlice(func(s *discoveryv1.EndpointSlice) { s.Endpoints[1].Addresses = []string{"10.0.0.3"} }), want: def},
		{name: "EndpointSlice: the port of ready endpoints", h: h.slice, old: slice,
			obj: withSlice(func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](11212) }), want: news},
		{name: "EndpointSlice: a hostname (a StatefulSet's server name)", h: h.slice, old: slice,
			obj: withSlice(func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = ptr.To(key.Name + "-0") }), want: news},
		{name: "EndpointSlice: deleted", h: h.slice, obj: slice, delete: true, want: def},
		{name: "Service: spec", h: h.sameName, old: svc, obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: "2"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}, want: def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := &recordingPriorityQueue{added: map[reconcile.Request]int{}}
			switch {
			case tc.delete:
				tc.h.Delete(ctx, event.DeleteEvent{Object: tc.obj}, q)
			case tc.old != nil:
				tc.h.Update(ctx, event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.obj}, q)
			default:
				tc.h.Create(ctx, event.CreateEvent{Object: tc.obj, IsInInitialList: tc.initial}, q)
			}
			got, ok := q.added[reconcile.Request{NamespacedName: key}]
			if !ok || len(q.added) != 1 {
				t.Fatalf("enqueued %v, want only %v", q.added, key)
			}
			if got != tc.want {
				t.Fatalf("priority %d, want %d", got, tc.want)
			}
		})
	}
}

// A pass's recheck goes at the default priority, whatever the priority of
// the news that enqueued the pass.
func TestRechecksAreNotNews(t *testing.T) {
	if res := requeue(0); !res.IsZero() {
		t.Fatalf("no recheck: %+v, want the zero result", res)
	}
	res := requeue(DefaultSecretResync)
	if res.RequeueAfter != DefaultSecretResync || res.Priority == nil || *res.Priority != status.DefaultPriority {
		t.Fatalf("recheck: %+v, want after %v at priority %d", res, DefaultSecretResync, status.DefaultPriority)
	}
}
