package status

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultAttempts is how often Update recomputes after conflicts before it
// gives the error back (the reconcile is then retried with backoff).
const defaultAttempts = 5

// Writer writes the status subresource of a controller's objects. It
// remembers, per object, the resourceVersion its status is known to be
// right for (its own last write, or a fresh read it found nothing to
// change in); a cached copy of any other version may predate that write,
// and is replaced by a fresh read before a status is computed from it.
type Writer struct {
	client     client.Client
	reader     client.Reader
	fieldOwner string
	attempts   int

	mu    sync.Mutex
	known map[types.NamespacedName]version
}

type version struct {
	uid             types.UID
	resourceVersion string
}

// NewWriter builds the writer of one controller: c sends the patches (the
// manager's client), reader reads fresh copies (the manager's APIReader:
// the cache may be behind), fieldOwner is the controller's field manager.
func NewWriter(c client.Client, reader client.Reader, fieldOwner string) *Writer {
	return &Writer{client: c, reader: reader, fieldOwner: fieldOwner, attempts: defaultAttempts,
		known: map[types.NamespacedName]version{}}
}

// Update sets obj's status with compute and writes it when it changed.
// compute must derive the status from obj as it is when called (it may
// read obj's current status, e.g. for transition times) and may be called
// again: when obj may predate this writer's last write, or on a conflict,
// obj is replaced by a fresh read and compute runs on that. A status that
// did not change sends no write. A deleted object is not an error.
func (w *Writer) Update(ctx context.Context, obj client.Object, compute func() error) (written bool, err error) {
	if err := w.Refresh(ctx, obj); err != nil {
		return false, err
	}
	for i := 0; ; i++ {
		before := obj.DeepCopyObject().(client.Object)
		if err := compute(); err != nil {
			return false, err
		}
		written, err = w.Patch(ctx, before, obj)
		if !apierrors.IsConflict(err) || i+1 >= w.attempts {
			return written, err
		}
		if err := w.read(ctx, obj); err != nil {
			return false, err
		}
	}
}

// Refresh replaces obj (a cached copy) by a fresh read unless its version
// is one this writer knows its status to be right for. Call it before
// computing a status from obj with side effects in between, then Patch.
func (w *Writer) Refresh(ctx context.Context, obj client.Object) error {
	if w.trusted(obj) {
		return nil
	}
	return w.read(ctx, obj)
}

// Patch writes after's status when it differs from before's (the object
// as last read), with before's resourceVersion as precondition: if the
// object changed since, the apiserver answers Conflict and nothing is
// written. before must be fresh (see Refresh).
func (w *Writer) Patch(ctx context.Context, before, after client.Object) (bool, error) {
	if equality.Semantic.DeepEqual(before, after) {
		w.remember(after)
		return false, nil
	}
	err := w.client.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(w.fieldOwner))
	if apierrors.IsNotFound(err) {
		w.Forget(client.ObjectKeyFromObject(after))
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing the status of %s: %w", client.ObjectKeyFromObject(after), err)
	}
	// after now holds the apiserver's answer, with the new version.
	w.remember(after)
	return true, nil
}

// Forget drops what the writer knows of a deleted object.
func (w *Writer) Forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.known, key)
}

func (w *Writer) read(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	if err := w.reader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(key)
		}
		return fmt.Errorf("reading %s from the apiserver: %w", key, err)
	}
	return nil
}

// trusted: the writer never wrote this object, or obj is the version it
// last wrote or checked. Without a write of ours nothing can be newer than
// what the cache shows us.
func (w *Writer) trusted(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.known[client.ObjectKeyFromObject(obj)]
	return !ok || (v.uid == obj.GetUID() && v.resourceVersion == obj.GetResourceVersion())
}

func (w *Writer) remember(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known[client.ObjectKeyFromObject(obj)] = version{uid: obj.GetUID(), resourceVersion: obj.GetResourceVersion()}
}
