package status

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// fakePriorityQueue records the priority of each request added to it, as
// controller-runtime's handler tests do (the rest of the interface is not
// expected to be called).
type fakePriorityQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added map[reconcile.Request]int
}

func newFakePriorityQueue() *fakePriorityQueue {
	return &fakePriorityQueue{added: map[reconcile.Request]int{}}
}

func (q *fakePriorityQueue) Add(item reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

func (q *fakePriorityQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, it := range items {
		q.added[it] = ptr.Deref(o.Priority, 0)
	}
}

func (q *fakePriorityQueue) GetWithPriority() (reconcile.Request, int, bool) {
	panic("not expected to be called")
}

// plainQueue is a queue without priorities: Add is all a handler may use.
type plainQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []reconcile.Request
}

func (q *plainQueue) Add(item reconcile.Request) { q.added = append(q.added, item) }

// The news of the test: a ConfigMap whose "ready" key is set, or changed.
var configMapNews = News[*corev1.ConfigMap]{
	Created: func(c *corev1.ConfigMap) bool { return c.Data["ready"] != "" },
	Updated: func(o, n *corev1.ConfigMap) bool { return o.Data["ready"] != n.Data["ready"] },
}

func configMap(rv, ready string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", ResourceVersion: rv},
		Data: map[string]string{"ready": ready}}
}

// deliver sends the event of kind to h on q.
func deliver(h handler.EventHandler, kind string, old, obj client.Object, initial bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ctx := context.Background()
	switch kind {
	case "create":
		h.Create(ctx, event.CreateEvent{Object: obj, IsInInitialList: initial}, q)
	case "update":
		h.Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: obj}, q)
	case "delete":
		h.Delete(ctx, event.DeleteEvent{Object: obj}, q)
	case "generic":
		h.Generic(ctx, event.GenericEvent{Object: obj}, q)
	}
}

// Each kind of event gets its priority: news ahead of everything, other
// events at controller-runtime's default, the initial list and resyncs
// low, through both kinds of handler the controllers wrap.
func TestPrioritizeNewsGivesEachEventItsPriority(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "sessions"}}
	inners := map[string]func() handler.EventHandler{
		"for the object": func() handler.EventHandler { return &handler.EnqueueRequestForObject{} },
		"map func": func() handler.EventHandler {
			return handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
				return []reconcile.Request{req}
			})
		},
	}
	for _, tc := range []struct {
		name     string
		kind     string
		old, obj client.Object
		initial  bool
		want     int
	}{
		{"created with news", "create", nil, configMap("2", "yes"), false, NewsPriority},
		{"created without news", "create", nil, configMap("2", ""), false, DefaultPriority},
		{"created with news, in the initial list", "create", nil, configMap("2", "yes"), true, handler.LowPriority},
		{"updated with news", "update", configMap("2", ""), configMap("3", "yes"), false, NewsPriority},
		{"news withdrawn", "update", configMap("2", "yes"), configMap("3", ""), false, NewsPriority},
		{"updated without news", "update", configMap("2", "yes"), configMap("3", "yes"), false, DefaultPriority},
		{"resync", "update", configMap("2", "yes"), configMap("2", "yes"), false, handler.LowPriority},
		{"deleted", "delete", nil, configMap("2", "yes"), false, DefaultPriority},
		{"generic", "generic", nil, configMap("2", "yes"), false, DefaultPriority},
		{"another kind", "update", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", ResourceVersion: "2"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", ResourceVersion: "3"}}, false, DefaultPriority},
	} {
		for inner, newInner := range inners {
			t.Run(tc.name+", "+inner, func(t *testing.T) {
				q := newFakePriorityQueue()
				deliver(PrioritizeNews(newInner(), configMapNews), tc.kind, tc.old, tc.obj, tc.initial, q)
				got, ok := q.added[req]
				if !ok || len(q.added) != 1 {
					t.Fatalf("enqueued %v, want only %v", q.added, req)
				}
				if got != tc.want {
					t.Fatalf("priority %d, want %d", got, tc.want)
				}
			})
		}
	}
}

// Without a priority queue the handler enqueues what it enqueued before.
func TestPrioritizeNewsWithoutAPriorityQueue(t *testing.T) {
	q := &plainQueue{}
	deliver(PrioritizeNews(&handler.EnqueueRequestForObject{}, configMapNews), "update", configMap("2", ""), configMap("3", "yes"), false, q)
	if len(q.added) != 1 || q.added[0].Name != "sessions" {
		t.Fatalf("enqueued %v, want shop/sessions", q.added)
	}
}

// A request already waiting at the default priority is moved ahead by
// news, and stays ahead of creations added after it: in controller-
// runtime's real queue, news is taken first.
func TestNewsIsTakenBeforeEarlierCreations(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("status-news-test")
	defer q.ShutDown()
	h := PrioritizeNews(&handler.EnqueueRequestForObject{}, configMapNews)
	named := func(name, rv, ready string) *corev1.ConfigMap {
		c := configMap(rv, ready)
		c.Name = name
		return c
	}
	for _, name := range []string{"a", "b", "c"} {
		deliver(h, "create", nil, named(name, "1", ""), false, q)
	}
	deliver(h, "update", named("c", "1", ""), named("c", "2", "yes"), false, q)
	deliver(h, "create", nil, named("d", "1", ""), false, q)
	item, priority, _ := q.GetWithPriority()
	if item.Name != "c" || priority != NewsPriority {
		t.Fatalf("took %v at priority %d first, want c at %d", item, priority, NewsPriority)
	}
	item, priority, _ = q.GetWithPriority()
	if item.Name != "a" || priority != DefaultPriority {
		t.Fatalf("took %v at priority %d second, want a at %d", item, priority, DefaultPriority)
	}
}
