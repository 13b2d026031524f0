package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// DefaultRolloutKindRecheck is how long "the Rollout kind is not served"
// is believed before discovery is asked again (Argo Rollouts may be
// installed later).
const DefaultRolloutKindRecheck = time.Minute

// rolloutReadTimeout bounds a read that waits for the Rollout informer's
// first sync (a kind the manager may not list would block it for ever).
const rolloutReadTimeout = 30 * time.Second

// kindNotServedError: the target kind's CRD is not installed. It becomes
// the TargetKindNotInstalled condition, looked at again after recheck.
type kindNotServedError struct {
	kind    autorebootv1alpha1.TargetKind
	recheck time.Duration
}

func (e *kindNotServedError) Error() string {
	return fmt.Sprintf("the %s kind (%s) is not served by the cluster: install Argo Rollouts; looked up again every %s",
		e.kind, autorebootv1alpha1.ArgoRolloutsAPIVersion, e.recheck)
}

// argoRollouts reads Rollouts from the manager's cache, whose informer for
// them is started only once a policy targets a Rollout and the kind is
// served: a cluster without Argo Rollouts costs one discovery per recheck
// (shared by every policy), and no watch. The informer then feeds the
// controller (policiesForTarget) and the throttle like the built-in kinds'.
type argoRollouts struct {
	mapper  meta.RESTMapper
	cache   cache.Cache
	clock   clock.PassiveClock
	recheck time.Duration
	// hook registers the informer's handlers, once.
	hook func(cache.Informer) error

	mu        sync.Mutex
	served    bool
	hooked    bool
	checkedAt time.Time
}

// ready reports whether Rollouts can be read, starting their informer the
// first time; a *kindNotServedError when the kind is not served.
func (a *argoRollouts) ready(ctx context.Context) error {
	if a == nil {
		return &kindNotServedError{kind: autorebootv1alpha1.KindRollout, recheck: DefaultRolloutKindRecheck}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.served {
		now := a.clock.Now()
		if !a.checkedAt.IsZero() && now.Sub(a.checkedAt) < a.recheck {
			return &kindNotServedError{kind: autorebootv1alpha1.KindRollout, recheck: a.recheck}
		}
		a.checkedAt = now
		_, err := a.mapper.RESTMapping(rolloutGVK.GroupKind(), rolloutGVK.Version)
		switch {
		case meta.IsNoMatchError(err):
			return &kindNotServedError{kind: autorebootv1alpha1.KindRollout, recheck: a.recheck}
		case err != nil:
			return fmt.Errorf("looking up the Rollout kind: %w", err)
		}
		a.served = true
	}
	if a.hooked {
		return nil
	}
	inf, err := a.cache.GetInformer(ctx, newRolloutObject(), cache.BlockUntilSynced(false))
	if err != nil {
		if meta.IsNoMatchError(err) {
			a.served = false
			return &kindNotServedError{kind: autorebootv1alpha1.KindRollout, recheck: a.recheck}
		}
		return fmt.Errorf("starting the Rollout informer: %w", err)
	}
	if a.hook != nil {
		if err := a.hook(inf); err != nil {
			return err
		}
	}
	a.hooked = true
	return nil
}

// Get and List read Rollouts from the cache once the kind is served.
func (a *argoRollouts) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := a.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rolloutReadTimeout)
	defer cancel()
	return a.cache.Get(ctx, key, obj, opts...)
}

func (a *argoRollouts) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := a.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rolloutReadTimeout)
	defer cancel()
	return a.cache.List(ctx, list, opts...)
}

// targetReader is the reader of kind's targets.
func (r *Reconciler) targetReader(kind autorebootv1alpha1.TargetKind) client.Reader {
	if kind == autorebootv1alpha1.KindRollout {
		return r.Rollouts
	}
	return r.Client
}

// routedReader reads Rollouts through argoRollouts and everything else
// through the manager's client (what referenced triggers read targets
// with).
type routedReader struct {
	client.Reader
	rollouts *argoRollouts
}

func (r routedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := asRollout(obj); ok {
		return r.rollouts.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r routedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*unstructured.UnstructuredList); ok && l.GroupVersionKind() == rolloutListGVK {
		return r.rollouts.List(ctx, list, opts...)
	}
	return r.Reader.List(ctx, list, opts...)
}

// hookRollouts feeds the Rollout informer's events to the throttle and,
// through it, to the controller: the policies targeting a Rollout whose
// restart decision may have changed are woken (targetDecisionChanged).
func (r *Reconciler) hookRollouts(inf cache.Informer) error {
	policies := r.policiesForTarget(autorebootv1alpha1.KindRollout)
	changed := targetDecisionChanged()
	wake := func(obj any, ok bool) {
		o, isObj := obj.(client.Object)
		if !ok || !isObj {
			return
		}
		var owners []client.ObjectKey
		for _, req := range policies(context.Background(), o) {
			owners = append(owners, req.NamespacedName)
		}
		r.Throttle.wakeOwners(owners)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { wake(obj, true) },
		UpdateFunc: func(old, obj any) {
			o, _ := old.(client.Object)
			n, _ := obj.(client.Object)
			wake(obj, changed.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}))
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			wake(obj, true)
		},
	})
	if err != nil {
		return fmt.Errorf("watching Rollouts: %w", err)
	}
	treg, err := inf.AddEventHandler(r.Throttle.handler())
	if err != nil {
		_ = inf.RemoveEventHandler(reg)
		return fmt.Errorf("throttle: watching Rollouts: %w", err)
	}
	r.Throttle.addRegistration(treg)
	return nil
}

// wakeOwners reconciles owners (delivered by Start, on the leader).
func (t *Throttle) wakeOwners(owners []client.ObjectKey) {
	if len(owners) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range owners {
		t.wakeLocked(o)
	}
}

// addRegistration makes the throttle's sync wait for one more informer.
func (t *Throttle) addRegistration(reg toolscache.ResourceEventHandlerRegistration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.regs = append(t.regs, reg)
}

// errorIsKindNotServed unwraps a *kindNotServedError.
func errorIsKindNotServed(err error) (*kindNotServedError, bool) {
	var e *kindNotServedError
	ok := errors.As(err, &e)
	return e, ok
}
