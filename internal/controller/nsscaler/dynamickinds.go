package nsscaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Kinds known only at run time — custom resources listed in spec.kinds,
// KEDA ScaledObjects where they are served — get an informer in the
// workload cache when first needed. Such a kind may be one the manager
// cannot list or watch (no RBAC for it, its CRD removed): the informer
// would then never sync, and a cache read waiting for it would block the
// reconcile — and with it every NSScaler. So the sync is bounded: a
// reconcile waits at most inlineSyncWait (only the first time a kind is
// started), the informer gets syncTimeout in the background, and a list or
// watch refused with 401/403/404 fails it at once. A failed kind's informer
// is removed (it stops retrying), the kind is reported KindUnavailable and
// tried again after kindRetryAfter; every other kind is handled meanwhile.
const (
	inlineSyncWait = 2 * time.Second
	syncTimeout    = 30 * time.Second
	// notServedRecheck: how long "this kind is not served" is believed
	// before discovery is asked again (KEDA may be installed later).
	notServedRecheck = 5 * time.Minute
)

type kindState int

const (
	kindSyncing kindState = iota
	kindReady
	kindFailed
)

// dynamicKind is one run-time kind and its informer.
type dynamicKind struct {
	state   kindState
	handler kindHandler
	obj     *unstructured.Unstructured // the informer's object, for its removal
	err     error
	retryAt time.Time
	// failedBefore: a sync of this kind failed once; later starts do not
	// make a reconcile wait for it.
	failedBefore bool
	synced       chan struct{}
}

// dynamicKinds hands out the handlers of run-time kinds.
type dynamicKinds struct {
	mapper meta.RESTMapper
	access workloadAccess
	cache  cache.Informers
	clock  clock.PassiveClock
	// watch registers an informer as a source of the controller.
	watch func(cache.Informer) error
	// resolve builds the handler of a kind from its REST mapping.
	resolve func(ctx context.Context, k KindKey, mapping *meta.RESTMapping) (kindHandler, error)
	// changed is called (without locks held) when a kind's state changed
	// in the background: every NSScaler should be reconciled.
	changed func()

	mu    sync.Mutex
	kinds map[KindKey]*dynamicKind
}

var errNotSynced = errors.New("not synced yet")

// handler returns the handler of a run-time kind, or why there is none.
func (d *dynamicKinds) handler(ctx context.Context, k KindKey) (kindHandler, error) {
	d.mu.Lock()
	dk, ok := d.kinds[k]
	if ok && dk.state == kindFailed && !d.clock.Now().Before(dk.retryAt) {
		delete(d.kinds, k)
		ok = false
	}
	if ok {
		d.mu.Unlock()
		return d.current(k)
	}
	failedBefore := dk != nil && dk.failedBefore
	var prevErr error
	if failedBefore {
		prevErr = dk.err
	}
	dk, err := d.start(ctx, k)
	if err != nil {
		d.kinds[k] = &dynamicKind{state: kindFailed, err: err, retryAt: d.retryAfter(err), failedBefore: failedBefore}
		d.mu.Unlock()
		return nil, err
	}
	// A retry reports the last failure while it syncs: the status says the
	// same until the kind works, instead of flapping every retry.
	dk.failedBefore, dk.err = failedBefore, prevErr
	d.kinds[k] = dk
	d.mu.Unlock()
	if !failedBefore {
		timer := time.NewTimer(inlineSyncWait)
		defer timer.Stop()
		select {
		case <-dk.synced:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return d.current(k)
}

// current reports the kind's state as it is now.
func (d *dynamicKinds) current(k KindKey) (kindHandler, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dk := d.kinds[k]
	switch {
	case dk == nil:
		return nil, fmt.Errorf("%s: %w", k, errNotSynced)
	case dk.state == kindReady:
		return dk.handler, nil
	case dk.state == kindSyncing && dk.err != nil:
		return nil, dk.err
	case dk.state == kindSyncing:
		return nil, fmt.Errorf("the cache of %s has %w", k, errNotSynced)
	}
	return nil, dk.err
}

// retryAfter is when a failed resolution is tried again.
func (d *dynamicKinds) retryAfter(err error) time.Time {
	if meta.IsNoMatchError(err) {
		return d.clock.Now().Add(notServedRecheck)
	}
	return d.clock.Now().Add(kindRetryAfter)
}

// start resolves the kind and starts its informer (d.mu held). The wait
// for its sync runs in the background.
func (d *dynamicKinds) start(ctx context.Context, k KindKey) (*dynamicKind, error) {
	mapping, err := d.mapper.RESTMapping(schemaGroupKind(k))
	if err != nil {
		return nil, fmt.Errorf("resolving kind %s: %w", k, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("kind %s is not namespaced", k)
	}
	h, err := d.resolve(ctx, k, mapping)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	inf, err := d.cache.GetInformer(ctx, u, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("starting the informer of %s: %w", k, err)
	}
	if err := d.watch(inf); err != nil {
		_ = d.cache.RemoveInformer(ctx, u)
		return nil, fmt.Errorf("watching %s: %w", k, err)
	}
	dk := &dynamicKind{state: kindSyncing, handler: h, obj: u, synced: make(chan struct{})}
	go d.awaitSync(k, dk, inf)
	return dk, nil
}

// awaitSync waits (bounded) for the informer's first list and records the
// outcome; a failure (timeout, or watchFailed meanwhile) removes it.
func (d *dynamicKinds) awaitSync(k KindKey, dk *dynamicKind, inf cache.Informer) {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	synced := toolscache.WaitForCacheSync(ctx.Done(), func() bool {
		d.mu.Lock()
		failed := dk.state == kindFailed
		d.mu.Unlock()
		return failed || inf.HasSynced()
	})
	d.mu.Lock()
	switch {
	case dk.state == kindFailed:
	case synced && inf.HasSynced():
		dk.state = kindReady
	default:
		d.failLocked(k, dk, fmt.Errorf("cannot list and watch %s: its cache did not sync within %s (does the manager's ServiceAccount have list and watch on it?)", k, syncTimeout))
	}
	close(dk.synced)
	d.mu.Unlock()
	d.changed()
}

// failLocked marks a kind failed and removes its informer (d.mu held).
func (d *dynamicKinds) failLocked(k KindKey, dk *dynamicKind, err error) {
	dk.state, dk.err, dk.failedBefore = kindFailed, err, true
	dk.retryAt = d.clock.Now().Add(kindRetryAfter)
	if dk.obj != nil {
		_ = d.cache.RemoveInformer(context.Background(), dk.obj)
	}
	_ = k
}

// watchFailed is the workload cache's watch error handler's report: a
// list or watch of a run-time kind that the apiserver refuses (401, 403,
// 404: no RBAC, CRD gone) fails the kind at once instead of retrying
// until the sync times out, or for ever after it synced.
func (d *dynamicKinds) watchFailed(typeDescription string, err error) {
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return
	}
	d.mu.Lock()
	failed := false
	for k, dk := range d.kinds {
		if dk.obj == nil || dk.state == kindFailed || dk.obj.GroupVersionKind().String() != typeDescription {
			continue
		}
		d.failLocked(k, dk, fmt.Errorf("cannot list and watch %s: %w", k, err))
		failed = true
	}
	d.mu.Unlock()
	if failed {
		d.changed()
	}
}
