package rebootpolicy

import (
	"context"
	"fmt"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
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
		return seconds(t.Probe.PeriodSeconds, 10)
	case t.SQL != nil:
		return seconds(t.SQL.PeriodSeconds, 30)
	case t.Watch != nil:
		return seconds(t.Watch.PeriodSeconds, 10)
	case t.Referenced != nil:
		return seconds(t.Referenced.PeriodSeconds, 10)
	}
	return 0
}

// specRefusal is the refusal that the policy's spec alone decides (the
// same for every reconcile and every replica), if any.
func (l Limits) specRefusal(p autorebootv1alpha1.Policy) *refusal {
	if err := validateTrigger(p.Trigger); err != nil {
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
// of workers. Slots go to RebootPolicies in order of creation (then name),
// so a newcomer can never push an older policy out, and every replica
// computes the same answer from the same cache.
func (r *Reconciler) admitted(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy) (map[string]bool, error) {
	out := map[string]bool{}
	if r.Limits.MaxPerNamespace <= 0 {
		for _, p := range rbp.Spec.Policies {
			out[p.Name] = true
		}
		return out, nil
	}
	var l autorebootv1alpha1.RebootPolicyList
	// Read only (sorted in this slice, never modified): every reconcile of
	// a namespace's 100 policies would copy all of them otherwise.
	if err := r.Client.List(ctx, &l, client.InNamespace(rbp.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list rebootpolicies in %s: %w", rbp.Namespace, err)
	}
	items := l.Items
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].Name < items[j].Name
	})
	used := 0
	for i := range items {
		it := &items[i]
		if it.Spec.Suspend || !it.DeletionTimestamp.IsZero() {
			continue
		}
		for _, p := range it.Spec.Policies {
			if r.Limits.specRefusal(p) != nil {
				continue
			}
			if used < r.Limits.MaxPerNamespace && it.UID == rbp.UID {
				out[p.Name] = true
			}
			used++
		}
	}
	return out, nil
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
