package nsscaler

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// decideNamespaces decides what happens to each namespace now: the ones
// this NSScaler selects and owns (selection.go: oldest owner wins,
// protected and whitelisted ones run), woken by a WakeRequest it grants
// (selfservice), then what time says (timeline.go: the schedule's phase
// and the wake entries in force) and whether it is departing (everything
// restored). The result is obs.plan, and when it next changes by itself.
func (r *Reconciler) decideNamespaces(ctx context.Context, scaler *scalingv1alpha1.NSScaler, obs *observation) error {
	plan, err := r.plan(ctx, scaler)
	if err != nil {
		var invalid *invalidSelectorError
		if !errors.As(err, &invalid) {
			return err
		}
		obs.planErr = err // selects nothing; what it parked is restored
	}
	if err := r.selfService(ctx, scaler, plan, obs); err != nil {
		return fmt.Errorf("wake requests: %w", err)
	}
	plan = plan.awake(obs.moment.asleep(), obs.moment.wokenSet())
	if obs.deleting {
		plan = releaseAll(plan)
	}
	plan.ParkedReplicas = scaler.Spec.ParkedReplicas
	obs.plan = plan
	obs.nextTransition = obs.moment.nextTransition(obs.now, plan)
	obs.wakeAt(obs.nextTransition)
	obs.wakeAt(obs.moment.nextChange(obs.now))
	for _, until := range obs.moment.wakeUntils() {
		obs.wakeAt(until)
	}
	return nil
}

// invalidSelectorError is a namespaceSelector the controller cannot use:
// the NSScaler then selects nothing, and what it parked is restored.
type invalidSelectorError struct{ err error }

func (e *invalidSelectorError) Error() string { return e.err.Error() }
func (e *invalidSelectorError) Unwrap() error { return e.err }

// plan reads every NSScaler and namespace from the cache and plans.
func (r *Reconciler) plan(ctx context.Context, scaler *scalingv1alpha1.NSScaler) (Plan, error) {
	var scalers scalingv1alpha1.NSScalerList
	if err := r.client.List(ctx, &scalers); err != nil {
		return Plan{}, fmt.Errorf("listing NSScalers: %w", err)
	}
	var nsList corev1.NamespaceList
	if err := r.cache.List(ctx, &nsList, client.UnsafeDisableDeepCopy); err != nil {
		return Plan{}, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]Namespace, 0, len(nsList.Items))
	for i := range nsList.Items {
		namespaces = append(namespaces, Namespace{Name: nsList.Items[i].Name, Labels: nsList.Items[i].Labels})
	}
	plan, err := PlanNamespaces(scaler, scalers.Items, namespaces, r.protection)
	if err != nil {
		return plan, &invalidSelectorError{err: err}
	}
	return plan, nil
}

// releaseAll turns a plan into the one of a departing NSScaler: every
// namespace it owns is restored, none parked.
func releaseAll(p Plan) Plan {
	return Plan{
		Parked:    sets.New[string](),
		Active:    p.Parked.Union(p.Active),
		Conflicts: p.Conflicts,
		Foreign:   p.Foreign,
		Protected: p.Protected,
	}
}

// Plan is what one NSScaler does with the cluster's namespaces.
type Plan struct {
	// Parked are the namespaces this NSScaler owns and parks.
	Parked sets.Set[string]
	// Active are the namespaces this NSScaler owns and keeps running
	// because they are whitelisted.
	Active sets.Set[string]
	// Conflicts are selected namespaces another NSScaler selects too, with
	// the owner (the oldest of them) — this NSScaler or the other.
	Conflicts []scalingv1alpha1.NamespaceConflict
	// Foreign are the selected namespaces another NSScaler owns; this one
	// leaves them alone.
	Foreign sets.Set[string]
	// Protected are selected namespaces that are never parked.
	Protected sets.Set[string]
	// Woken are the namespaces of Active that run because of a wake entry
	// (they would be parked otherwise).
	Woken sets.Set[string]
	// ParkedReplicas is spec.parkedReplicas: what a parked workload keeps.
	ParkedReplicas int32
}

// Owns reports whether the NSScaler acts on the namespace.
func (p Plan) Owns(ns string) bool { return p.Parked.Has(ns) || p.Active.Has(ns) }

// awake applies the moment to a plan: while the schedule says Awake every
// owned namespace runs; while Asleep those with a wake entry in force run.
func (p Plan) awake(asleep bool, woken sets.Set[string]) Plan {
	out := p
	out.Parked, out.Active, out.Woken = sets.New[string](), p.Active.Clone(), sets.New[string]()
	for ns := range p.Parked {
		switch {
		case !asleep:
			out.Active.Insert(ns)
		case woken.Has(ns):
			out.Active.Insert(ns)
			out.Woken.Insert(ns)
		default:
			out.Parked.Insert(ns)
		}
	}
	return out
}

// phase is what the plan amounts to: Asleep when every owned namespace is
// parked, Awake when none is, Partial otherwise.
func (p Plan) phase() scalingv1alpha1.Phase {
	switch {
	case p.Parked.Len() == 0:
		return scalingv1alpha1.PhaseAwake
	case p.Active.Len() == 0:
		return scalingv1alpha1.PhaseAsleep
	}
	return scalingv1alpha1.PhasePartial
}
