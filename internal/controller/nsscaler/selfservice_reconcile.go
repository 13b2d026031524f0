package nsscaler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// selfService decides the WakeRequests of the namespaces the NSScaler
// owns, writes each decision to its request before anything is acted on,
// and adds the grants in force to the wake entries of this reconcile. A
// departing NSScaler decides nothing (it restores everything anyway).
func (r *Reconciler) selfService(ctx context.Context, scaler *scalingv1alpha1.NSScaler, plan Plan, obs *observation) error {
	if obs.deleting {
		return nil
	}
	requests, err := r.wakeRequestsIn(ctx, plan.Parked.Union(plan.Active))
	if err != nil {
		return err
	}
	pass := decideSelfService(scaler, plan.Owns, requests, obs.now)
	for _, d := range pass.decisions {
		if _, err := writeWakeVerdict(ctx, r.client, d.request, scaler.Name, d.verdict, obs.now); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			pass.forget(d.request) // deleted meanwhile: its grant never was
			continue
		}
		r.reportWakeVerdict(obs.events, d.request, scaler, d.verdict)
	}
	for ns, w := range pass.woken {
		if cur, ok := obs.moment.woken[ns]; !ok || w.Until.After(cur) {
			obs.moment.woken[ns] = w.Until.Time
		}
	}
	obs.wakeAt(pass.nextExpiry())
	obs.selfService = pass
	r.metrics.tenantWakes.WithLabelValues(scaler.Name).Set(float64(len(pass.woken)))
	return nil
}

// wakeRequestsIn lists (from the cache, not copied: only read) the
// WakeRequests of the namespaces, one indexed list per namespace: the work
// follows the owned namespaces, not every request in the cluster.
func (r *Reconciler) wakeRequestsIn(ctx context.Context, namespaces sets.Set[string]) ([]scalingv1alpha1.WakeRequest, error) {
	var out []scalingv1alpha1.WakeRequest
	for _, ns := range sets.List(namespaces) {
		var l scalingv1alpha1.WakeRequestList
		if err := r.client.List(ctx, &l, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing WakeRequests in %s: %w", ns, err)
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

// forget drops a grant decided for a request that was deleted before the
// decision could be written.
func (p *selfServicePass) forget(r *scalingv1alpha1.WakeRequest) {
	w, ok := p.woken[r.Namespace]
	if !ok || w.Request != r.Name || r.Status.Phase != "" {
		return
	}
	delete(p.woken, r.Namespace)
	if times := p.ledger[r.Namespace]; len(times) > 0 {
		p.ledger[r.Namespace] = times[:len(times)-1]
	}
}

// setSelfServiceStatus reports the grants in force and the ledger; a
// reconcile that decided nothing (a departing NSScaler) keeps them.
func setSelfServiceStatus(st *scalingv1alpha1.NSScalerStatus, scaler *scalingv1alpha1.NSScaler, obs *observation) {
	if obs.selfService == nil {
		st.TenantWakes, st.SelfServiceGrants = scaler.Status.TenantWakes, scaler.Status.SelfServiceGrants
		return
	}
	st.TenantWakes = obs.selfService.tenantWakes()
	st.SelfServiceGrants = obs.selfService.grantsLedger()
}

// scalersForWakeRequest maps a request to the NSScalers that select its
// namespace (the owner decides on it).
func (r *Reconciler) scalersForWakeRequest(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.scalersFor(ctx, obj.GetNamespace(), r.namespaceLabels(ctx, obj.GetNamespace()), "")
}

// wokenPhrase says, in status.reason, which namespaces run for a wake-up
// and by whose: spec.wake, or a team's WakeRequest.
func wokenPhrase(obs *observation) string {
	byRequest := sets.New[string]()
	if obs.selfService != nil {
		for ns := range obs.selfService.woken {
			if obs.plan.Woken.Has(ns) {
				byRequest.Insert(ns)
			}
		}
	}
	out := ""
	if bySpec := obs.plan.Woken.Difference(byRequest); bySpec.Len() > 0 {
		out += fmt.Sprintf("; %s woken by spec.wake", namespacesPhrase(bySpec, maxMessageErrors))
	}
	if byRequest.Len() > 0 {
		out += fmt.Sprintf("; %s woken by a WakeRequest", namespacesPhrase(byRequest, maxMessageErrors))
	}
	return out
}
