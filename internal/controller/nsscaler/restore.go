package nsscaler

import (
	"context"
)

// restoreWorkload returns the workload to its recorded original and removes
// the annotation in one write (for custom resources: the scale first, then
// the annotation, so a crash in between leaves the original recorded).
//
// The value restored is the annotation's, not a remembered one: a user who
// edits the annotation of a parked workload changes what it comes back to.
func (r *Reconciler) restoreWorkload(ctx context.Context, h kindHandler, w Workload, d Decision) (Workload, error) {
	return h.restore(ctx, w, d.Original)
}
