package status

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// NewsPriority is the priority in a controller's queue of a reconcile
// enqueued by news for the status (PrioritizeNews): above the default
// (0) of creations, spec changes and rechecks, as handler.LowPriority is
// below it for the initial list and resyncs.
const NewsPriority = 100

// DefaultPriority is the priority of work that is not news for a status;
// a reconcile returns it with its requeues, which would otherwise keep
// the priority of the event that enqueued it.
const DefaultPriority = 0

// News says which events of watched objects of type T change what the
// reconciled object's status reports (a workload's ready replicas, an
// EndpointSlice's ready endpoints). Nil funcs say no.
type News[T client.Object] struct {
	// Created: a new object (not one of the initial list) is news.
	Created func(T) bool
	// Updated: the change from old to new is news.
	Updated func(old, new T) bool
}

// PrioritizeNews wraps h so that the requests it enqueues for the events
// that news says are news for the status go ahead of other work in the
// controller's priority queue: a user watching the status sees readiness
// while a burst of new objects waits for its first reconciles. Other
// events, deletions and generic events keep h's priorities; the events of
// the initial list and resyncs keep controller-runtime's low priority.
// Without a priority queue h is used as it is.
func PrioritizeNews[T client.Object](h handler.EventHandler, news News[T]) handler.EventHandler {
	return &newsHandler[T]{EventHandler: h, news: news}
}

type newsHandler[T client.Object] struct {
	handler.EventHandler
	news News[T]
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h *newsHandler[T]) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if o, ok := e.Object.(T); ok && !e.IsInInitialList && h.news.Created != nil && h.news.Created(o) {
		q = atNewsPriority(q)
	}
	h.EventHandler.Create(ctx, e, q)
}

func (h *newsHandler[T]) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	o, ok1 := e.ObjectOld.(T)
	n, ok2 := e.ObjectNew.(T)
	if ok1 && ok2 && h.news.Updated != nil && h.news.Updated(o, n) {
		q = atNewsPriority(q)
	}
	h.EventHandler.Update(ctx, e, q)
}

// atNewsPriority is q adding at NewsPriority what is added without a
// priority; q itself when it is not a priority queue.
func atNewsPriority(q queue) queue {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return newsQueue{pq}
}

// newsQueue is controller-runtime's own way (handler's
// workqueueWithDefaultPriority) of giving a handler's adds a priority:
// it is still a PriorityQueue, so the handler inside may ask for a
// priority of its own.
type newsQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q newsQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q newsQueue) AddAfter(item reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (q newsQueue) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (q newsQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(NewsPriority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
