// Package rebootpolicy benchmarks the RebootPolicy controller as it ships:
// the real manager binary (--controllers=rebootpolicy), authenticated as
// config/rbac's ServiceAccount, on the local kwok cluster. 1,000
// RebootPolicies, each with one httpGet probe at periodSeconds 1 against a
// local HTTP server, run until every one reports Success and the
// Deployment controller has observed every target; then it measures, in a
// steady window, the probe schedule drift (at the server) and the
// manager's apiserver writes, then makes 50 endpoints fail at once and
// measures change → restart patch as a watch sees it.
//
// The manager's writes are read from the apiserver's audit log, which
// logs every request of the manager's ServiceAccount and nothing else.
//
// BENCH_SCALE=0.1 (or BENCH_RBP_POLICIES=n, BENCH_RBP_CHANGED=n,
// BENCH_STEADY=10s) runs a smaller smoke test.
package rebootpolicy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	fullPolicies = 1000
	fullChanged  = 50
	fullSteady   = 30 * time.Second
	period       = time.Second
	namespace    = "bench"

	// Targets (docs/rebootpolicy.md).
	maxDriftP99       = 100 * time.Millisecond
	maxChangePatchP99 = period + 200*time.Millisecond
	maxCPUCores       = 1.0
)

// probeServer answers /p/<i>; it records arrival times and fails paths on
// demand.
type probeServer struct {
	mu       sync.Mutex
	arrivals [][]time.Time
	failing  []atomic.Bool
}

func newProbeServer(n int) *probeServer {
	return &probeServer{arrivals: make([][]time.Time, n), failing: make([]atomic.Bool, n)}
}

func (s *probeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	if err != nil || i < 0 || i >= len(s.arrivals) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	s.mu.Lock()
	s.arrivals[i] = append(s.arrivals[i], now)
	s.mu.Unlock()
	if s.failing[i].Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// drifts returns |interval − period| of consecutive probes of every path
// within [from, to].
func (s *probeServer) drifts(from, to time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for i := range s.arrivals {
		var prev time.Time
		for _, t := range s.arrivals[i] {
			if t.Before(from) || t.After(to) {
				continue
			}
			if !prev.IsZero() {
				d := t.Sub(prev) - period
				if d < 0 {
					d = -d
				}
				out = append(out, d)
			}
			prev = t
		}
	}
	return out
}

// cpuSeconds is utime+stime of pid in seconds.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // CLK_TCK is 100 on Linux
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := atomic.Int64{}
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func BenchmarkRebootPolicy1000HTTPProbes(b *testing.B) {
	for range b.N {
		runBench(b)
	}
}

func runBench(b *testing.B) {
	policies := benchkit.Size(b, "rbp_policies", fullPolicies)
	changed := min(benchkit.Size(b, "rbp_changed", fullChanged), policies)
	steady := benchkit.Window(b, "steady", fullSteady, 10*time.Second)
	sum := benchkit.NewSummary("rebootpolicy")
	defer sum.Finish(b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, NamePrefix: "rbp-bench", AuditPolicy: benchkit.AuditPolicy(benchkit.ManagerUser)})
	if err != nil {
		sum.Fatalf(b, "starting the cluster: %v", err)
	}
	defer c.Stop()
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config/crd/bases/autoreboot.runbook.dev_rebootpolicies.yaml")); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "crd/rebootpolicies.autoreboot.runbook.dev", "--timeout=60s"); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = autorebootv1alpha1.AddToScheme(scheme)
	k8s, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}

	srv := newProbeServer(policies)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	defer func() { _ = hs.Close() }()
	port := l.Addr().(*net.TCPAddr).Port

	dir := b.TempDir()
	kubeconfig, err := benchkit.ManagerKubeconfig(ctx, c, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	bin, err := cluster.BuildManager(ctx, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	// The probe server is allowed by exact address, as an admin would; all
	// policies live in one namespace, so its share is lifted.
	mgr, err := cluster.StartManager(ctx, bin, kubeconfig, "--controllers=rebootpolicy", "--zap-log-level=info",
		"--operator-namespace="+benchkit.ManagerNamespace,
		fmt.Sprintf("--probe-allow=127.0.0.1:%d", port), "--probe-max-per-namespace=0")
	if err != nil {
		sum.Fatalf(b, "starting the manager: %v", err)
	}
	defer func() {
		_ = mgr.Stop()
		// Kept for analysis: restarts and fires are logged at info level.
		_ = os.WriteFile(filepath.Join(os.TempDir(), "rbp-bench-manager.log"), []byte(mgr.Logs()), 0o644)
	}()

	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	obs, err := benchkit.Observe(ctx, c.Config, scheme, namespace, &autorebootv1alpha1.RebootPolicy{}, &appsv1.Deployment{})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer obs.Stop()
	// Every change the benchmark's watch sees, by anyone (the manager's
	// status writes and restarts, kube-controller-manager's Deployment
	// status), counted while counting is on.
	var counting atomic.Bool
	var rbpChanges, depChanges atomic.Int64
	if err := obs.OnUpdate(ctx, &autorebootv1alpha1.RebootPolicy{}, func(_, _ any) {
		if counting.Load() {
			rbpChanges.Add(1)
		}
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if err := obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, _ any) {
		if counting.Load() {
			depChanges.Add(1)
		}
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}

	created := time.Now()
	err = parallel(policies, 16, func(i int) error {
		name := fmt.Sprintf("w-%d", i)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
				},
			},
		}
		if err := k8s.Create(ctx, dep); err != nil {
			return err
		}
		return k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: autorebootv1alpha1.RebootPolicySpec{
				Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: name},
				// Storm control on, as in production: a dependency that
				// stays down restarts its target once, not once per rollout.
				MinRestartInterval: &metav1.Duration{Duration: 10 * time.Minute},
				Policies: []autorebootv1alpha1.Policy{{Name: "http", Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Host: "127.0.0.1", Port: intstr.FromInt(port), Path: fmt.Sprintf("/p/%d", i)}},
					PeriodSeconds: int32(period / time.Second), TimeoutSeconds: 1, FailureThreshold: 1,
				}}}},
			},
		})
	})
	if err != nil {
		sum.Fatalf(b, "creating the policies: %v", err)
	}
	createdIn := time.Since(created)

	// Settled: every policy's status reports Success for its current
	// generation, and the Deployment controller has observed every target
	// (until then a target counts as rolling out and storm control
	// (rightly) defers its restart, which would measure the
	// kube-controller-manager's backlog instead of the operator).
	var allHealthy, allObserved time.Duration
	progress, err := obs.Until(ctx, 3*time.Minute, 10*time.Minute, func() (bool, string, error) {
		var rbps autorebootv1alpha1.RebootPolicyList
		if err := obs.Reader().List(ctx, &rbps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		var deps appsv1.DeploymentList
		if err := obs.Reader().List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		healthy, reported, observed := 0, 0, 0
		for i := range rbps.Items {
			r := &rbps.Items[i]
			if len(r.Status.Policies) == 1 && r.Status.Policies[0].LastResult != "" && r.Status.ObservedGeneration == r.Generation {
				reported++
				if r.Status.Policies[0].LastResult == autorebootv1alpha1.ResultSuccess {
					healthy++
				}
			}
		}
		for i := range deps.Items {
			if deps.Items[i].Status.ObservedGeneration >= deps.Items[i].Generation {
				observed++
			}
		}
		if healthy == policies && allHealthy == 0 {
			allHealthy = time.Since(created)
		}
		if observed == policies && allObserved == 0 {
			allObserved = time.Since(created)
		}
		return healthy == policies && observed == policies,
			fmt.Sprintf("%d/%d policies reported (%d Success), %d/%d Deployments observed by their controller", reported, policies, healthy, observed, policies), nil
	})
	settled := time.Since(created)
	if err != nil {
		sum.Target(false, "settle: %s after %s", progress, settled.Round(time.Second))
		sum.Fatalf(b, "settling: %v", err)
	}
	sum.Figure("%d policies and their Deployments created in %s by 16 parallel clients, settled after %s (all reported Success after %s; kube-controller-manager had observed every target after %s)",
		policies, createdIn.Round(time.Millisecond), settled.Round(time.Millisecond), allHealthy.Round(time.Millisecond), allObserved.Round(time.Millisecond))

	// Steady state: nothing changes; measuring it is the point of this wait.
	cpu0, _ := cpuSeconds(mgr.Pid())
	counting.Store(true)
	from := time.Now()
	select {
	case <-time.After(steady):
	case <-mgr.Exited():
		sum.Fatalf(b, "the manager exited during the steady window")
	}
	to := time.Now()
	counting.Store(false)
	cpu1, _ := cpuSeconds(mgr.Pid())
	drift := srv.drifts(from, to)
	cores := (cpu1 - cpu0) / to.Sub(from).Seconds()
	rss := rssMiB(mgr.Pid())

	// Change → patch: `changed` endpoints start failing at once. A flipped
	// Deployment counts when its restartedAt annotation differs from the
	// value it had right before the flip. Only Deployments never
	// restarted are flipped (one restarted before would be in its
	// cooldown).
	prev := map[string]string{}
	var flipIdx []int
	var deps appsv1.DeploymentList
	if err := obs.Reader().List(ctx, &deps); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	restartedBefore := 0
	for i := range deps.Items {
		d := &deps.Items[i]
		if _, restarted := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; restarted {
			restartedBefore++
			continue
		}
		if len(flipIdx) == changed {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimPrefix(d.Name, "w-"))
		if err != nil {
			continue
		}
		prev[d.Name] = d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
		flipIdx = append(flipIdx, idx)
	}
	if len(flipIdx) < changed {
		sum.Fatalf(b, "only %d Deployments were never restarted", len(flipIdx))
	}
	var flip atomic.Pointer[time.Time]
	patched := make(chan time.Duration, changed)
	var seenMu sync.Mutex
	seen := map[string]bool{}
	if err := obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, newObj any) {
		t := flip.Load()
		d, ok := newObj.(*appsv1.Deployment)
		if t == nil || !ok {
			return
		}
		was, flipped := prev[d.Name]
		if !flipped {
			return
		}
		if v := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; v == "" || v == was {
			return
		}
		seenMu.Lock()
		defer seenMu.Unlock()
		if !seen[d.Name] {
			seen[d.Name] = true
			patched <- time.Since(*t)
		}
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	now := time.Now()
	flip.Store(&now)
	for _, i := range flipIdx {
		srv.failing[i].Store(true)
	}
	var lat []time.Duration
	var lastSeen time.Time
	deadline := time.After(2 * time.Minute)
	for len(lat) < changed {
		select {
		case d := <-patched:
			lat = append(lat, d)
			lastSeen = time.Now()
		case <-deadline:
			sum.Target(false, "change→patch: only %d/%d changes patched within 2m", len(lat), changed)
			sum.Fatalf(b, "only %d/%d changes were patched", len(lat), changed)
		}
	}

	evs, err := benchkit.ReadAudit(c.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		sum.Fatalf(b, "reading the audit log: %v", err)
	}
	steadyWrites := benchkit.Writes(benchkit.Between(evs, from, to))
	settleWrites := benchkit.Writes(benchkit.Between(evs, created, from))
	flipWrites := benchkit.Writes(benchkit.Between(evs, now, lastSeen))

	sum.Figure("manager writes until settled: %s", benchkit.Describe(benchkit.CountBy(settleWrites, (*benchkit.AuditEvent).Key)))
	sum.Target(benchkit.Percentile(drift, 0.99) < maxDriftP99, "probe schedule drift over %d probes p50 %s p99 %s (target p99 < %s)",
		len(drift), benchkit.Percentile(drift, 0.5).Round(10*time.Microsecond), benchkit.Percentile(drift, 0.99).Round(10*time.Microsecond), maxDriftP99)
	sum.Target(len(steadyWrites) == 0, "manager writes during %s of steady state: %d (%s; target 0)",
		steady, len(steadyWrites), benchkit.Describe(benchkit.CountBy(steadyWrites, (*benchkit.AuditEvent).Key)))
	sum.Figure("object changes seen by a watch in the steady state, all writers: %d RebootPolicy, %d Deployment", rbpChanges.Load(), depChanges.Load())
	sum.Target(cores < maxCPUCores, "manager CPU in the steady state %.3f cores (target < %.0f)", cores, maxCPUCores)
	sum.Figure("manager RSS %.0f MiB", rss)
	sum.Figure("targets restarted before the flip (a probe failed while settling): %d", restartedBefore)
	sum.Target(benchkit.Percentile(lat, 0.99) <= maxChangePatchP99, "change→restart patch seen by a watch, %d endpoints failing at once: p50 %s p99 %s max %s (target p99 ≤ %s)",
		changed, benchkit.Percentile(lat, 0.5).Round(time.Millisecond), benchkit.Percentile(lat, 0.99).Round(time.Millisecond), benchkit.Percentile(lat, 1).Round(time.Millisecond), maxChangePatchP99)
	sum.Figure("manager writes from the flip until the last restart patch was seen: %s", benchkit.Describe(benchkit.CountBy(flipWrites, (*benchkit.AuditEvent).Key)))

	b.ReportMetric(float64(benchkit.Percentile(drift, 0.50).Microseconds())/1000, "drift-p50-ms")
	b.ReportMetric(float64(benchkit.Percentile(drift, 0.99).Microseconds())/1000, "drift-p99-ms")
	b.ReportMetric(float64(benchkit.Percentile(lat, 0.50).Milliseconds()), "change-patch-p50-ms")
	b.ReportMetric(float64(benchkit.Percentile(lat, 0.99).Milliseconds()), "change-patch-p99-ms")
	b.ReportMetric(cores, "cpu-cores")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(float64(len(steadyWrites)), "steady-writes")
	sum.Finish(b)
}
