package nsscaler

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// writePool writes one reconcile's jobs, writeConcurrency at a time, as
// they are decided. Its writers start with the first job: a reconcile with
// nothing to write starts none.
type writePool struct {
	ctx       context.Context
	r         *Reconciler
	p         *workloadPass
	jobs      chan job
	wg        sync.WaitGroup
	perWriter [][]outcome
	start     time.Time
	submitted int
}

func (r *Reconciler) newWritePool(ctx context.Context, p *workloadPass) *writePool {
	return &writePool{ctx: ctx, r: r, p: p}
}

// submit hands a job to the writers; it blocks while all of them are busy
// and the small queue is full, which paces the decisions to the writes.
func (wp *writePool) submit(j job) {
	if wp.jobs == nil {
		wp.startWriters()
	}
	wp.submitted++
	wp.jobs <- j
}

func (wp *writePool) startWriters() {
	n := wp.r.writeConcurrency
	wp.start = wp.r.clock.Now()
	wp.jobs = make(chan job, n)
	wp.perWriter = make([][]outcome, n)
	for i := range n {
		wp.wg.Go(func() {
			for j := range wp.jobs {
				wp.perWriter[i] = append(wp.perWriter[i], wp.r.writeWorkload(wp.ctx, wp.p, j))
			}
		})
	}
}

// wait waits for the submitted jobs, measures the pass, and returns their
// outcomes.
func (wp *writePool) wait() []outcome {
	if wp.jobs == nil {
		return nil
	}
	close(wp.jobs)
	wp.wg.Wait()
	outcomes := make([]outcome, 0, wp.submitted)
	for _, written := range wp.perWriter {
		outcomes = append(outcomes, written...)
	}
	wp.r.observeWritePass(wp.ctx, wp.p.self, outcomes, wp.r.clock.Since(wp.start).Seconds())
	return outcomes
}

// runJobs writes jobs through a write pool and returns their outcomes.
func (r *Reconciler) runJobs(ctx context.Context, p *workloadPass, jobs []job) []outcome {
	wp := r.newWritePool(ctx, p)
	for _, j := range jobs {
		wp.submit(j)
	}
	return wp.wait()
}

// observeWritePass records the duration of a park or restore pass.
func (r *Reconciler) observeWritePass(ctx context.Context, self string, outcomes []outcome, seconds float64) {
	var parked, restored int
	for _, o := range outcomes {
		switch o.done {
		case ActionPark:
			parked++
		case ActionRestore:
			restored++
		}
	}
	if parked > 0 {
		r.metrics.ParkDuration.WithLabelValues(self).Observe(seconds)
	}
	if restored > 0 {
		r.metrics.RestoreDuration.WithLabelValues(self).Observe(seconds)
	}
	log.FromContext(ctx).Info("workloads written", "parked", parked, "restored", restored, "jobs", len(outcomes), "seconds", seconds)
}
