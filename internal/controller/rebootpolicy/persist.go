package rebootpolicy

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// persistFire writes a fresh fire to status before any target is patched
// for it (see Reconcile).
func (r *Reconciler) persistFire(ctx context.Context, p *pass) (ctrl.Result, error) {
	if !p.fresh || len(p.decision.restart) == 0 {
		return ctrl.Result{}, nil
	}
	return r.persist(ctx, p)
}

// persist writes status when it changed, then acknowledges the fires it
// holds. A conflict means the copy was stale: the fires stay
// unacknowledged and are merged into a fresh copy on the retry.
func (r *Reconciler) persist(ctx context.Context, p *pass) (ctrl.Result, error) {
	if _, err := r.Status.Patch(ctx, p.persisted, p.rbp); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status conflict, reconciling again")
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
		return ctrl.Result{}, err
	}
	p.written = true
	nn := client.ObjectKeyFromObject(p.rbp)
	for _, a := range p.acks {
		r.Workers.Ack(nn, a.policy, a.hash, a.seq)
	}
	for _, ps := range p.rbp.Status.Policies {
		r.Workers.MarkPending(nn, ps.Name, ps.PendingTrigger)
	}
	p.acks = nil
	p.persisted = p.rbp.DeepCopy()
	if p.requested {
		// Once, when recorded: a conflict leaves it for the retry.
		p.requested = false
		r.Metrics.restartRequested()
		p.events.Normal(p.rbp, nil, autorebootv1alpha1.EventRestartRequested, "Restart",
			"restart requested (%s): the targets are restarted within the windows and the throttle", p.rbp.Status.LastRestartRequest)
	}
	return ctrl.Result{}, nil
}

func (p *pass) setConditions(in conditionInput) {
	setConditions(&p.rbp.Status, p.rbp.Generation, p.now, in)
}
