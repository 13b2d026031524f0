package nsscaler

import (
	"context"
)

// parkWorkload scales the workload to zero (or suspends it). When the
// decision carries a record, the original goes into the annotation in the
// same write; a workload that already carries an original is re-parked
// without touching it, so a second park never records zero as the original.
func (r *Reconciler) parkWorkload(ctx context.Context, h kindHandler, w Workload, d Decision) (Workload, error) {
	return h.park(ctx, w, d.Record)
}
