package rebootpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
)

// baselineNamespace holds the bare client's targets, apart from the bench
// namespaces the settle and steady phases count.
const baselineNamespace = "rbp-baseline"

// bareFlip measures the floor of change→restart on this cluster, under the
// manager's steady probing, right after the manager's own flip: a bare
// client probes n endpoints of its own at the same period (each from a
// random phase, as the manager's probes are) and, on an endpoint's first
// failing answer, makes the three writes the manager makes for a restart —
// the fire into a RebootPolicy's status, the restart patch, the outcome
// into status — with no controller, queue or cache in between. Its
// RebootPolicies are suspended and target nothing, so the manager leaves
// them alone. What the target leaves above this floor is the manager's.
func (r *sizeRun) bareFlip(ctx context.Context, n int) {
	if err := r.createBaseline(ctx, n); err != nil {
		r.sum.Fatalf(r.b, "baseline: %v", err)
	}
	srv := newProbeServer(n)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	srv.serve(l)
	defer srv.close()
	seen := make(chan time.Duration, n)
	var flip atomic.Pointer[time.Time]
	var once sync.Map
	if err := r.obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, newObj any) {
		t := flip.Load()
		d, ok := newObj.(*appsv1.Deployment)
		if t == nil || !ok || d.Namespace != baselineNamespace || d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation] == "" {
			return
		}
		if _, dup := once.LoadOrStore(d.Name, true); !dup {
			seen <- time.Since(*t)
		}
	}); err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	pctx, stop := context.WithCancel(ctx)
	detected := make([]atomic.Int64, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	// One kept-alive connection per endpoint, as the manager's probes keep.
	hc := &http.Client{Timeout: period, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	url := fmt.Sprintf("http://%s/p/", l.Addr())
	for i := range n {
		wg.Go(func() {
			if err := r.bareTarget(pctx, hc, url, i, &flip, &detected[i]); err != nil {
				errs <- err
			}
		})
	}
	defer wg.Wait()
	defer stop()
	// Every bare probe has answered once before the flip: all are in their
	// period's rhythm.
	if _, err := r.obs.Until(ctx, time.Minute, 2*time.Minute, func() (bool, string, error) {
		probed := 0
		for i := range n {
			if srv.firstAfter(i, time.Time{}) >= 0 {
				probed++
			}
		}
		return probed == n, fmt.Sprintf("%d/%d bare probes answered", probed, n), nil
	}); err != nil {
		r.sum.Fatalf(r.b, "baseline: %v", err)
	}
	cpuBefore, cpuErr := benchkit.CPUByProcess()
	now := time.Now()
	flip.Store(&now)
	for i := range n {
		srv.failing[i].Store(true)
	}
	var lat []time.Duration
	deadline := time.After(2 * time.Minute)
	for len(lat) < n {
		select {
		case d := <-seen:
			lat = append(lat, d)
		case err := <-errs:
			r.sum.Fatalf(r.b, "baseline: %v", err)
		case <-deadline:
			r.sum.Fatalf(r.b, "baseline: only %d/%d bare restarts seen within 2m", len(lat), n)
		}
	}
	cpu := "unknown"
	if cpuAfter, err := benchkit.CPUByProcess(); err == nil && cpuErr == nil {
		// Who had the CPU meanwhile, to set beside the manager's flip.
		cpu = benchkit.DescribeCPUSpent(cpuBefore, cpuAfter, benchkit.Percentile(lat, 1), goruntime.NumCPU())
	}
	var detect []time.Duration
	for i := range n {
		detect = append(detect, time.Duration(detected[i].Load()))
	}
	p := func(d []time.Duration, q float64) time.Duration {
		return benchkit.Percentile(d, q).Round(time.Millisecond)
	}
	r.sum.Figure("the same three writes by a bare client (its own %d probes at the same period, no controller), same cluster and load, right after: change→restart patch seen p50 %s p99 %s max %s (detect p50 %s p99 %s); CPU until its last patch was seen: %s",
		n, p(lat, 0.5), p(lat, 0.99), p(lat, 1), p(detect, 0.5), p(detect, 0.99), cpu)
	r.b.ReportMetric(float64(benchkit.Percentile(lat, 0.99).Milliseconds()), "bare-change-patch-p99-ms")
}

// createBaseline makes the bare client's Deployments and its suspended
// RebootPolicies (one each, targeting a name that does not exist), and
// waits until the manager has written their status and the Deployment
// controller has observed the Deployments: neither writes in the flip.
func (r *sizeRun) createBaseline(ctx context.Context, n int) error {
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baselineNamespace}}); err != nil {
		return err
	}
	err := parallel(n, 8, func(i int) error {
		name := fmt.Sprintf("base-%d", i)
		if err := r.k8s.Create(ctx, benchDeployment(baselineNamespace, name)); err != nil {
			return err
		}
		rbp := r.policy(0, baselineNamespace, name)
		rbp.Spec.Target.Name = "absent-" + name
		rbp.Spec.Suspend = true
		return r.k8s.Create(ctx, rbp)
	})
	if err != nil {
		return err
	}
	_, err = r.obs.Until(ctx, time.Minute, 3*time.Minute, func() (bool, string, error) {
		ready := 0
		for i := range n {
			key := client.ObjectKey{Namespace: baselineNamespace, Name: fmt.Sprintf("base-%d", i)}
			var d appsv1.Deployment
			var p autorebootv1alpha1.RebootPolicy
			if r.obs.Reader().Get(ctx, key, &d) == nil && r.obs.Reader().Get(ctx, key, &p) == nil &&
				d.Status.ObservedGeneration >= d.Generation && p.Status.ObservedGeneration == p.Generation {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d/%d baseline targets observed", ready, n), nil
	})
	return err
}

// bareTarget probes endpoint i every period from a random phase until its
// first failing answer after the flip, then makes the three writes.
func (r *sizeRun) bareTarget(ctx context.Context, hc *http.Client, url string, i int, flip *atomic.Pointer[time.Time], detected *atomic.Int64) error {
	next := time.Now().Add(time.Duration(rand.Int64N(int64(period))))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		next = next.Add(period)
		ok, err := bareProbe(ctx, hc, fmt.Sprintf("%s%d", url, i))
		if err != nil || ok {
			continue
		}
		if t := flip.Load(); t != nil {
			detected.Store(int64(time.Since(*t)))
		}
		return r.bareRestart(ctx, fmt.Sprintf("base-%d", i))
	}
}

func bareProbe(ctx context.Context, hc *http.Client, url string) (ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// bareRestart is the manager's sequence for one target, written directly:
// the fire, the restart patch (with the manager's body), the outcome.
func (r *sizeRun) bareRestart(ctx context.Context, name string) error {
	key := client.ObjectKey{Namespace: baselineNamespace, Name: name}
	rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	now := metav1.Now()
	fire := fmt.Sprintf(`{"status":{"policies":[{"name":"http-0","lastResult":"Failure","reason":"ProbeFailed","message":"HTTP probe failed with statuscode: 503","consecutiveFailures":1,"lastTriggerTime":%q,"pendingTrigger":true}]}}`,
		now.UTC().Format(time.RFC3339))
	if err := r.k8s.Status().Patch(ctx, rbp, client.RawPatch(types.MergePatchType, []byte(fire))); err != nil {
		return fmt.Errorf("fire of %s: %w", name, err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	restart := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		autorebootv1alpha1.RestartIDAnnotation, key.String(), autorebootv1alpha1.RestartedAtAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if err := r.k8s.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(restart))); err != nil {
		return fmt.Errorf("restart of %s: %w", name, err)
	}
	outcome := fmt.Sprintf(`{"status":{"restartCount":1,"lastRestartTime":%q,"policies":[{"name":"http-0","lastResult":"Failure","reason":"ProbeFailed","message":"HTTP probe failed with statuscode: 503","consecutiveFailures":1,"lastTriggerTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	if err := r.k8s.Status().Patch(ctx, rbp, client.RawPatch(types.MergePatchType, []byte(outcome))); err != nil {
		return fmt.Errorf("outcome of %s: %w", name, err)
	}
	return nil
}
