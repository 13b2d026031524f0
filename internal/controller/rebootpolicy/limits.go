package rebootpolicy

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe"
)

// Limits keep one namespace's RebootPolicies from exhausting the manager
// (admin flags). Zero values mean no limit.
type Limits struct {
	// MinPeriod is the shortest period a policy may probe, query or read at.
	MinPeriod time.Duration
	// MaxPerNamespace is the most policies (probe workers) that run in one
	// namespace; the oldest RebootPolicies' policies get the slots.
	MaxPerNamespace int
}

// refusal is why a policy gets no worker.
type refusal struct{ reason, message string }

// triggerPeriod is the period a trigger runs at, defaults applied.
func triggerPeriod(t autorebootv1alpha1.Trigger) time.Duration {
	switch {
	case t.Probe != nil:
		return probe.Seconds(t.Probe.PeriodSeconds, 10)
	case t.SQL != nil:
		return probe.Seconds(t.SQL.PeriodSeconds, 30)
	case t.Watch != nil:
		return probe.Seconds(t.Watch.PeriodSeconds, 10)
	case t.Referenced != nil:
		return probe.Seconds(t.Referenced.PeriodSeconds, 10)
	}
	return 0
}

// specRefusal is the refusal that the policy's spec alone decides (the
// same for every reconcile and every replica), if any.
func (l Limits) specRefusal(p autorebootv1alpha1.Policy) *refusal {
	if err := probe.ValidateTrigger(p.Trigger); err != nil {
		return &refusal{autorebootv1alpha1.ReasonInvalidSpec, err.Error()}
	}
	if l.MinPeriod > 0 && triggerPeriod(p.Trigger) < l.MinPeriod {
		return &refusal{autorebootv1alpha1.ReasonPeriodBelowMinimum,
			fmt.Sprintf("the period %s is below the manager's minimum of %s (--probe-min-period): the policy does not run",
				triggerPeriod(p.Trigger), l.MinPeriod)}
	}
	return nil
}

// admitted returns the policies of rbp that fit in its namespace's share
// of workers (see namespaceSlots).
func (r *Reconciler) admitted(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy) (map[string]bool, error) {
	if r.Limits.MaxPerNamespace <= 0 {
		out := map[string]bool{}
		for _, p := range rbp.Spec.Policies {
			out[p.Name] = true
		}
		return out, nil
	}
	slots, err := r.namespaceSlots(ctx, rbp.Namespace)
	if err != nil {
		return nil, err
	}
	return slots.of(rbp), nil
}

// slots are the policies of a namespace that get a worker, by
// RebootPolicy.
type slots map[types.NamespacedName]slot

type slot struct {
	uid      types.UID
	policies map[string]bool
}

// of returns rbp's admitted policies; an object of the same name but
// another UID (deleted and created again) has none yet.
func (s slots) of(rbp *autorebootv1alpha1.RebootPolicy) map[string]bool {
	sl, ok := s[client.ObjectKeyFromObject(rbp)]
	if !ok || sl.uid != rbp.UID {
		return map[string]bool{}
	}
	return sl.policies
}

func (s slots) has(obj types.NamespacedName, policy string) bool { return s[obj].policies[policy] }

// namespaceSlots computes who gets the namespace's MaxPerNamespace slots
// from the cache. Slots go to RebootPolicies in order of creation (then
// name), so a newcomer can never push an older policy out, and every
// replica computes the same answer from the same cache.
func (r *Reconciler) namespaceSlots(ctx context.Context, namespace string) (slots, error) {
	var l autorebootv1alpha1.RebootPolicyList
	// Read only (sorted in this slice, never modified): every reconcile of
	// a namespace's 100 policies would copy all of them otherwise.
	if err := r.Client.List(ctx, &l, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list rebootpolicies in %s: %w", namespace, err)
	}
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].Name < items[j].Name
	})
	out := slots{}
	used := 0
	for i := range items {
		it := &items[i]
		if it.Spec.Suspend || !it.DeletionTimestamp.IsZero() {
			continue
		}
		sl := slot{uid: it.UID, policies: map[string]bool{}}
		for _, p := range it.Spec.Policies {
			if r.Limits.specRefusal(p) != nil {
				continue
			}
			if used < r.Limits.MaxPerNamespace {
				sl.policies[p.Name] = true
			}
			used++
		}
		out[client.ObjectKeyFromObject(it)] = sl
	}
	return out, nil
}

// namespaceLocks serialises admission per namespace.
type namespaceLocks struct {
	mu    sync.Mutex
	locks map[string]*namespaceLock
}

type namespaceLock struct {
	sync.Mutex
	users int
}

// lock locks namespace and returns its unlock.
func (n *namespaceLocks) lock(namespace string) func() {
	n.mu.Lock()
	if n.locks == nil {
		n.locks = map[string]*namespaceLock{}
	}
	l := n.locks[namespace]
	if l == nil {
		l = &namespaceLock{}
		n.locks[namespace] = l
	}
	l.users++
	n.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		n.mu.Lock()
		if l.users--; l.users == 0 {
			delete(n.locks, namespace)
		}
		n.mu.Unlock()
	}
}

func tooManyProbes(limit int) refusal {
	return refusal{autorebootv1alpha1.ReasonTooManyProbes,
		fmt.Sprintf("the namespace already runs the manager's maximum of %d policies (--probe-max-per-namespace): this one does not run until others are removed or suspended", limit)}
}

// policiesWaitingForSlots maps any RebootPolicy event to the RebootPolicies
// of its namespace that wait for a slot: a deletion, suspension or shrink
// may have freed one.
func (r *Reconciler) policiesWaitingForSlots(ctx context.Context, obj client.Object) []reconcile.Request {
	var l autorebootv1alpha1.RebootPolicyList
	if err := r.Client.List(ctx, &l, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range l.Items {
		if l.Items[i].Name != obj.GetName() && waitsForSlot(&l.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
	}
	return out
}

func waitsForSlot(rbp *autorebootv1alpha1.RebootPolicy) bool {
	for _, ps := range rbp.Status.Policies {
		if ps.Reason == autorebootv1alpha1.ReasonTooManyProbes {
			return true
		}
	}
	return false
}
