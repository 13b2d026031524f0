package probe

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// RefWatcher is how referenced triggers learn of changes without polling:
// the controller's own metadata-only informers of ConfigMaps (and of
// Secrets, when the admin turns that on), trimmed to each object's
// identity, resourceVersion and the usable label — never data, labels or
// annotations (a kubectl last-applied-configuration copies the data) — and
// an index of which referenced probers care about which object. A change of
// the resourceVersion wakes those probers, which then read just that object
// with a GET and fingerprint just the keys their targets use.
type RefWatcher struct {
	// cache is nil when nothing is watched (then every kind is polled).
	cache        cache.Cache
	watchSecrets bool

	mu       sync.Mutex
	interest map[refKey]map[*referencedProber]struct{}
	byPolicy map[types.NamespacedName]map[*referencedProber]struct{}
}

func newRefIndex() *RefWatcher {
	return &RefWatcher{
		interest: map[refKey]map[*referencedProber]struct{}{},
		byPolicy: map[types.NamespacedName]map[*referencedProber]struct{}{},
	}
}

// NewRefWatcher builds the informers on their own cache (namespaces as
// the manager's --watch-namespaces; all when empty) and registers it with
// mgr, which starts and syncs it before the controllers.
func NewRefWatcher(mgr ctrl.Manager, namespaces []string, watchSecrets bool) (*RefWatcher, error) {
	w := newRefIndex()
	w.watchSecrets = watchSecrets
	opts := cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            trimReferenced,
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("building the referenced-object cache: %w", err)
	}
	w.cache = c
	kinds := []autorebootv1alpha1.WatchKind{autorebootv1alpha1.WatchConfigMap}
	if watchSecrets {
		kinds = append(kinds, autorebootv1alpha1.WatchSecret)
	}
	for _, k := range kinds {
		inf, err := c.GetInformer(context.Background(), metadataObject(k), cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("watching %s metadata: %w", k, err)
		}
		if _, err := inf.AddEventHandler(w.handler(k)); err != nil {
			return nil, fmt.Errorf("watching %s metadata: %w", k, err)
		}
	}
	if err := mgr.Add(status.ManagedCache{Cache: c}); err != nil {
		return nil, fmt.Errorf("adding the referenced-object cache: %w", err)
	}
	return w, nil
}

func metadataObject(kind autorebootv1alpha1.WatchKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	return m
}

// trimReferenced keeps of an object's metadata what the triggers read.
func trimReferenced(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = m.Name, m.Namespace, m.UID, m.ResourceVersion
	if v, ok := m.Labels[autorebootv1alpha1.UsableLabel]; ok {
		out.Labels = map[string]string{autorebootv1alpha1.UsableLabel: v}
	}
	return out, nil
}

// watches reports whether objects of kind are watched.
func (w *RefWatcher) watches(kind autorebootv1alpha1.WatchKind) bool {
	if w == nil || w.cache == nil {
		return false
	}
	return kind == autorebootv1alpha1.WatchConfigMap || (kind == autorebootv1alpha1.WatchSecret && w.watchSecrets)
}

// metadata returns the watched object's trimmed metadata from the cache;
// nil when it does not exist.
func (w *RefWatcher) metadata(ctx context.Context, k refKey) (*metav1.PartialObjectMetadata, error) {
	m := metadataObject(k.kind)
	err := w.cache.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: k.name}, m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return m, err
}

func (w *RefWatcher) handler(kind autorebootv1alpha1.WatchKind) toolscache.ResourceEventHandler {
	wake := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(client.Object); ok {
			w.wake(refKey{kind: kind, namespace: m.GetNamespace(), name: m.GetName()})
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: wake,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(client.Object)
			n, ok2 := newObj.(client.Object)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return // a resync: nothing changed
			}
			wake(newObj)
		},
		DeleteFunc: wake,
	}
}

// wake wakes the probers interested in k.
func (w *RefWatcher) wake(k refKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.interest[k] {
		p.wake()
	}
}

// WakePolicy wakes the referenced probers of a RebootPolicy (a target
// changed: its template may reference something else now).
func (w *RefWatcher) WakePolicy(nn types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.byPolicy[nn] {
		p.wake()
	}
}

// register adds p to the policy index (for wakePolicy).
func (w *RefWatcher) register(p *referencedProber) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byPolicy[p.policy] == nil {
		w.byPolicy[p.policy] = map[*referencedProber]struct{}{}
	}
	w.byPolicy[p.policy][p] = struct{}{}
}

// setInterest replaces what p is woken for.
func (w *RefWatcher) setInterest(p *referencedProber, keys map[refKey]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range p.interest {
		if _, keep := keys[k]; keep {
			continue
		}
		if m := w.interest[k]; m != nil {
			delete(m, p)
			if len(m) == 0 {
				delete(w.interest, k)
			}
		}
	}
	for k := range keys {
		if w.interest[k] == nil {
			w.interest[k] = map[*referencedProber]struct{}{}
		}
		w.interest[k][p] = struct{}{}
	}
	p.interest = keys
}

// drop forgets p (its worker stopped).
func (w *RefWatcher) drop(p *referencedProber) {
	w.setInterest(p, nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.byPolicy[p.policy]; m != nil {
		delete(m, p)
		if len(m) == 0 {
			delete(w.byPolicy, p.policy)
		}
	}
}

// CanWatchSecrets fails at start-up, with the fix in the message, when the
// admin turned on the Secret watch without granting list on Secrets: the
// informer would otherwise retry forever and the manager never become
// ready.
func CanWatchSecrets(reader client.Reader) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := reader.List(context.Background(), list, client.Limit(1)); err != nil {
		return fmt.Errorf("--watch-referenced-secrets needs list and watch on secrets, which the manager's role does not grant by default "+
			"(see docs/rebootpolicy.md#change-detection): %w", err)
	}
	return nil
}
