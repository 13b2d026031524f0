// Package shutdown keeps a stopping manager's log free of errors that only
// say it is stopping.
package shutdown

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Quiet wraps r so that a reconcile cut short because the manager is
// stopping (its context canceled: a signal, or leadership lost) ends
// without an error. controller-runtime would log such an error as
// "Reconciler error" with a stack trace and requeue a request that its
// shutting-down queue drops anyway; the next leader reconciles every
// object from the start, so nothing is lost.
func Quiet[T comparable](r reconcile.TypedReconciler[T]) reconcile.TypedReconciler[T] {
	return reconcile.TypedFunc[T](func(ctx context.Context, req T) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			return reconcile.Result{}, nil
		}
		return res, err
	})
}
