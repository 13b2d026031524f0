// Package rebootpolicy benchmarks the RebootPolicy controller as it ships:
// the real manager binary (--controllers=rebootpolicy), authenticated as
// config/rbac's ServiceAccount, on the local kwok cluster.
//
// BenchmarkRebootPolicyHTTPProbes is a sweep over the number of httpGet
// probes (1,000 and 10,000) at periodSeconds 1 against a local HTTP server,
// each size on its own cluster: 1,000 RebootPolicies (one Deployment each)
// carry 1 or 10 probes, 100 probes per namespace (the default
// --probe-max-per-namespace). Once every policy reports Success and the
// Deployment controller has observed every target it measures, in a
// steady window, the probe schedule drift (at the server), the manager's
// CPU, RSS and apiserver writes; at 1,000 it then makes 50 endpoints fail
// at once and measures change → restart patch as a watch sees it. Every
// size ends with its SUMMARY line, and the sweep with one SWEEP line per
// size.
//
// The manager's writes are read from the apiserver's audit log, which
// logs every request of the manager's ServiceAccount and nothing else.
//
// BENCH_SCALE=0.1 (or BENCH_RBP_PROBES_1000=n, BENCH_RBP_PROBES_10000=n,
// BENCH_RBP_CHANGED=n, BENCH_STEADY=10s) runs a smaller smoke test;
// BENCH_RBP_MANAGER_FLAGS="--flag=value ..." adds manager flags;
// BENCH_RBP_PROFILE_DIR=dir saves the manager's CPU profile of the steady
// window and its heap and goroutines there (a diagnosis: profiling
// perturbs the figures);
// -bench 'RebootPolicyHTTPProbes/probes=10000' runs one size.
package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
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
	fullChanged = 50
	fullSteady  = 30 * time.Second
	period      = time.Second
	namespace   = "bench"
	// rbpCount RebootPolicies (and Deployments) carry the probes of every
	// size: the Deployment controller needs ~3 minutes to observe 1,000 new
	// Deployments, and each more would add to every run.
	rbpCount = 1000
	// probesPerNamespace is the default --probe-max-per-namespace.
	probesPerNamespace = 100
	// changeSize is the size at which change → restart is measured.
	changeSize = 1000

	// Targets (docs/rebootpolicy.md; issue 38 for the drift and the CPU of
	// the HTTP probes).
	maxDriftP99       = 10 * time.Millisecond
	maxChangePatchP99 = period + 200*time.Millisecond
	maxCPUCores       = 0.6
)

// sweepSizes are the probe counts of the sweep.
var sweepSizes = []int{1000, 10000}

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

func BenchmarkRebootPolicyHTTPProbes(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())
	bin, _, err := benchkit.BuildReleaseManager(ctx, b.TempDir())
	if err != nil {
		b.Fatalf("building the manager: %v", err)
	}
	var rows []string
	for _, full := range sweepSizes {
		b.Run(fmt.Sprintf("probes=%d", full), func(b *testing.B) {
			for range b.N {
				rows = append(rows, runSize(ctx, b, bin, full))
			}
		})
	}
	// One line per size, together at the end (a parent benchmark's own
	// log is not shown).
	for _, r := range rows {
		fmt.Println(r)
	}
}

// sizeRun is one size of the sweep: its cluster, manager and probes.
type sizeRun struct {
	b   *testing.B
	sum *benchkit.Summary
	c   *cluster.Cluster
	k8s client.Client
	obs *benchkit.Observer
	mgr *cluster.Manager
	srv *probeServer
	// prof fetches the manager's profiles, apiProf kube-apiserver's of the
	// flip (nil: not asked for).
	prof    *profiler
	apiProf *benchkit.APIServerProfiler
	// probes in all; perRBP of them per RebootPolicy, rbps RebootPolicies.
	probes, perRBP, rbps int
	port                 int
	created              time.Time
}

// shape spreads n probes of a sweep size full over RebootPolicies of
// full/rbpCount probes each (1 or 10), in namespaces of probesPerNamespace.
func shape(n, full int) (perRBP, rbps, namespaces int) {
	perRBP = max(1, full/rbpCount)
	rbps = (n + perRBP - 1) / perRBP
	namespaces = (n + probesPerNamespace - 1) / probesPerNamespace
	return perRBP, rbps, namespaces
}

// nsOf is the namespace of RebootPolicy j (its probes never straddle two:
// probesPerNamespace is a multiple of perRBP).
func (r *sizeRun) nsOf(j int) string {
	return fmt.Sprintf("%s-%d", namespace, j*r.perRBP/probesPerNamespace)
}

// probesOf is how many probes RebootPolicy j carries (the last may carry
// fewer in a reduced run).
func (r *sizeRun) probesOf(j int) int { return min(r.perRBP, r.probes-j*r.perRBP) }

func isBenchNamespace(ns string) bool { return strings.HasPrefix(ns, namespace+"-") }

// runSize measures one size and returns its SWEEP line.
func runSize(ctx context.Context, b *testing.B, bin string, full int) string {
	r := &sizeRun{b: b, sum: benchkit.NewSummary(fmt.Sprintf("rebootpolicy/probes=%d", full))}
	defer r.sum.Finish(b)
	r.probes = benchkit.Size(b, fmt.Sprintf("rbp_probes_%d", full), full)
	var namespaces int
	r.perRBP, r.rbps, namespaces = shape(r.probes, full)
	// stop tears down whatever start got to, also when it fails half-way.
	defer r.stop()
	r.start(ctx, bin, namespaces)
	r.create(ctx)
	r.settle(ctx)
	st := r.steady(ctx)
	ok := true
	if full == changeSize {
		ok = r.changeToRestart(ctx)
		r.bareFlip(ctx, min(benchkit.Size(r.b, "rbp_changed", fullChanged), r.rbps))
	}
	ok = r.sum.Target(st.driftP99() <= maxDriftP99, "probe schedule drift over %d probe intervals p50 %s p99 %s max %s (target p99 ≤ %s)",
		len(st.drift), st.pct(0.5), st.pct(0.99), st.pct(1), maxDriftP99) && ok
	ok = r.sum.Target(st.cores <= maxCPUCores, "manager CPU in the steady state %.3f cores (target ≤ %.1f)", st.cores, maxCPUCores) && ok
	ok = r.sum.Target(len(st.writes) == 0, "manager writes during %s of steady state: %d (%s; target 0)",
		st.window, len(st.writes), benchkit.Describe(benchkit.CountBy(st.writes, (*benchkit.AuditEvent).Key))) && ok
	r.sum.Figure("object changes seen by a watch in the steady state, all writers: %d RebootPolicy, %d Deployment", st.rbpChanges, st.depChanges)
	r.sum.Figure("manager RSS %.0f MiB", st.rss)
	b.ReportMetric(float64(st.pct(0.50).Microseconds())/1000, "drift-p50-ms")
	b.ReportMetric(float64(st.pct(0.99).Microseconds())/1000, "drift-p99-ms")
	b.ReportMetric(st.cores, "cpu-cores")
	b.ReportMetric(st.rss, "rss-MiB")
	b.ReportMetric(float64(len(st.writes)), "steady-writes")
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
	}
	// The change → restart figure, where measured, is in the SUMMARY line;
	// its verdict counts here too.
	row := fmt.Sprintf("SWEEP rebootpolicy probes=%d: drift p50 %s p99 %s max %s; manager CPU %.3f cores; RSS %.0f MiB; apiserver writes in %s steady %d; load %s => %s",
		r.probes, st.pct(0.5), st.pct(0.99), st.pct(1), st.cores, st.rss, st.window, len(st.writes), loadAvg(), verdict)
	b.Log(row)
	return row
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// start brings up the cluster, the probe server and the manager, and the
// benchmark's own watch of the bench namespaces.
func (r *sizeRun) start(ctx context.Context, bin string, namespaces int) {
	b, sum := r.b, r.sum
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, NamePrefix: "rbp-bench", AuditPolicy: benchkit.AuditPolicy(benchkit.ManagerUser)})
	if err != nil {
		sum.Fatalf(b, "starting the cluster: %v", err)
	}
	r.c = c
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config/crd/bases/autoreboot.runbook.dev_rebootpolicies.yaml")); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if err := cluster.WaitEstablished(ctx, time.Minute, c.Kubectl, "rebootpolicies.autoreboot.runbook.dev"); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = autorebootv1alpha1.AddToScheme(scheme)
	if r.k8s, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	r.srv = newProbeServer(r.probes)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	r.srv.serve(l)
	b.Cleanup(r.srv.close)
	r.port = l.Addr().(*net.TCPAddr).Port

	dir := b.TempDir()
	kubeconfig, err := benchkit.ManagerKubeconfig(ctx, c, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	// The probe server is allowed by exact address, as an admin would;
	// every other limit (--probe-min-period, --probe-max-per-namespace) is
	// the default.
	args := []string{"--controllers=rebootpolicy", "--zap-log-level=info",
		"--operator-namespace=" + benchkit.ManagerNamespace, fmt.Sprintf("--probe-allow=127.0.0.1:%d", r.port)}
	// BENCH_RBP_MANAGER_FLAGS adds manager flags (space-separated), to
	// compare a setting against the defaults; the SUMMARY names them.
	if extra := strings.Fields(os.Getenv("BENCH_RBP_MANAGER_FLAGS")); len(extra) > 0 {
		args = append(args, extra...)
		sum.Figure("manager flags beyond the defaults: %s", strings.Join(extra, " "))
	}
	if r.prof, err = newProfiler(); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if r.prof != nil {
		args = append(args, r.prof.flag())
		sum.Figure("PROFILED (figures perturbed): profiles in %s", r.prof.dir)
	}
	if r.apiProf, err = benchkit.NewAPIServerProfiler("BENCH_RBP_APISERVER_PROFILE_DIR", c.Config); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if r.apiProf != nil {
		sum.Figure("kube-apiserver's CPU profile of the flip in %s", r.apiProf.Dir())
	}
	sum.Figure("manager runs with the chart's %s", benchkit.UseChartRuntimeEnv(b))
	r.mgr, err = cluster.StartManager(ctx, bin, kubeconfig, args...)
	if err != nil {
		sum.Fatalf(b, "starting the manager: %v", err)
	}
	if err := parallel(namespaces, 8, func(i int) error {
		return r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", namespace, i)}})
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if r.obs, err = benchkit.Observe(ctx, c.Config, scheme, "", &autorebootv1alpha1.RebootPolicy{}, &appsv1.Deployment{}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
}

func (r *sizeRun) stop() {
	if r.obs != nil {
		r.obs.Stop()
	}
	if r.mgr != nil {
		_ = r.mgr.Stop()
		// Kept for analysis: restarts and fires are logged at info level.
		_ = os.WriteFile(filepath.Join(os.TempDir(), fmt.Sprintf("rbp-bench-manager-%d.log", r.probes)), []byte(r.mgr.Logs()), 0o644)
	}
	r.c.Stop()
}

// create makes the Deployments and their RebootPolicies, 16 clients at
// once.
func (r *sizeRun) create(ctx context.Context) {
	r.created = time.Now()
	err := parallel(r.rbps, 16, func(j int) error {
		name, ns := fmt.Sprintf("w-%d", j), r.nsOf(j)
		if err := r.k8s.Create(ctx, benchDeployment(ns, name)); err != nil {
			return err
		}
		return r.k8s.Create(ctx, r.policy(j, ns, name))
	})
	if err != nil {
		r.sum.Fatalf(r.b, "creating the policies: %v", err)
	}
	r.sum.Figure("%d probes in %d RebootPolicies (%d each) and their Deployments created in %s by 16 parallel clients",
		r.probes, r.rbps, r.perRBP, time.Since(r.created).Round(time.Millisecond))
}

// benchDeployment is a target with no replicas: restarts are template
// patches the Deployment controller observes without scheduling a pod.
func benchDeployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// policy is RebootPolicy j: its probes get the paths of their global
// index.
func (r *sizeRun) policy(j int, ns, name string) *autorebootv1alpha1.RebootPolicy {
	var policies []autorebootv1alpha1.Policy
	for k := range r.probesOf(j) {
		policies = append(policies, autorebootv1alpha1.Policy{Name: fmt.Sprintf("http-%d", k), Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Port: intstr.FromInt(r.port), Path: fmt.Sprintf("/p/%d", j*r.perRBP+k)}},
			PeriodSeconds: int32(period / time.Second), TimeoutSeconds: 1, FailureThreshold: 1,
		}}})
	}
	return &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: name},
			// Storm control on, as in production: a dependency that stays
			// down restarts its target once, not once per rollout.
			MinRestartInterval: &metav1.Duration{Duration: 10 * time.Minute},
			Policies:           policies,
		},
	}
}

// settle waits until every policy's status reports Success for its
// current generation, and the Deployment controller has observed every
// target (until then a target counts as rolling out and storm control
// (rightly) defers its restart, which would measure the
// kube-controller-manager's backlog instead of the operator).
func (r *sizeRun) settle(ctx context.Context) {
	var allHealthy, allObserved time.Duration
	progress, err := r.obs.Until(ctx, 3*time.Minute, 12*time.Minute, func() (bool, string, error) {
		healthy, reported, err := r.countHealthy(ctx)
		if err != nil {
			return false, "", err
		}
		var deps appsv1.DeploymentList
		if err := r.obs.Reader().List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		observed := 0
		for i := range deps.Items {
			if isBenchNamespace(deps.Items[i].Namespace) && deps.Items[i].Status.ObservedGeneration >= deps.Items[i].Generation {
				observed++
			}
		}
		if healthy == r.probes && allHealthy == 0 {
			allHealthy = time.Since(r.created)
		}
		if observed == r.rbps && allObserved == 0 {
			allObserved = time.Since(r.created)
		}
		return healthy == r.probes && observed == r.rbps,
			fmt.Sprintf("%d/%d probes reported (%d Success), %d/%d Deployments observed by their controller", reported, r.probes, healthy, observed, r.rbps), nil
	})
	settled := time.Since(r.created)
	if err != nil {
		r.sum.Target(false, "settle: %s after %s", progress, settled.Round(time.Second))
		r.sum.Fatalf(r.b, "settling: %v", err)
	}
	r.sum.Figure("settled after %s (all probes reported Success after %s; kube-controller-manager had observed every target after %s)",
		settled.Round(time.Millisecond), allHealthy.Round(time.Millisecond), allObserved.Round(time.Millisecond))
}

// countHealthy counts the probes whose policy status is reported for the
// current generation, and those of them reporting Success.
func (r *sizeRun) countHealthy(ctx context.Context) (healthy, reported int, err error) {
	var rbps autorebootv1alpha1.RebootPolicyList
	if err := r.obs.Reader().List(ctx, &rbps, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for i := range rbps.Items {
		rbp := &rbps.Items[i]
		if rbp.Status.ObservedGeneration != rbp.Generation {
			continue
		}
		for _, ps := range rbp.Status.Policies {
			if ps.LastResult != "" {
				reported++
			}
			if ps.LastResult == autorebootv1alpha1.ResultSuccess {
				healthy++
			}
		}
	}
	return healthy, reported, nil
}

// steadyResult is what the steady window measured.
type steadyResult struct {
	from, to               time.Time
	window                 time.Duration
	drift                  []time.Duration
	cores, rss             float64
	writes                 []benchkit.AuditEvent
	rbpChanges, depChanges int64
}

func (s steadyResult) pct(p float64) time.Duration {
	return benchkit.Percentile(s.drift, p).Round(10 * time.Microsecond)
}

func (s steadyResult) driftP99() time.Duration { return benchkit.Percentile(s.drift, 0.99) }

// steady watches a window in which nothing changes: measuring it is the
// point of this wait.
func (r *sizeRun) steady(ctx context.Context) steadyResult {
	st := steadyResult{window: benchkit.Window(r.b, "steady", fullSteady, 10*time.Second)}
	// Every change the benchmark's watch sees in the bench namespaces, by
	// anyone (the manager's status writes and restarts,
	// kube-controller-manager's Deployment status), while counting is on.
	var counting atomic.Bool
	var rbpChanges, depChanges atomic.Int64
	count := func(n *atomic.Int64) func(_, newObj any) {
		return func(_, newObj any) {
			if o, ok := newObj.(client.Object); ok && counting.Load() && isBenchNamespace(o.GetNamespace()) {
				n.Add(1)
			}
		}
	}
	if err := r.obs.OnUpdate(ctx, &autorebootv1alpha1.RebootPolicy{}, count(&rbpChanges)); err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	if err := r.obs.OnUpdate(ctx, &appsv1.Deployment{}, count(&depChanges)); err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	cpu0, _ := benchkit.CPUSeconds(r.mgr.Pid())
	conns0 := r.srv.conns.Load()
	counting.Store(true)
	st.from = time.Now()
	if r.prof != nil {
		r.prof.startCPU(ctx, fmt.Sprintf("manager-%d", r.probes), st.window-time.Second)
	}
	select {
	case <-time.After(st.window):
	case <-r.mgr.Exited():
		r.sum.Fatalf(r.b, "the manager exited during the steady window")
	}
	st.to = time.Now()
	counting.Store(false)
	cpu1, _ := benchkit.CPUSeconds(r.mgr.Pid())
	st.drift = r.srv.drifts(st.from, st.to)
	st.cores = (cpu1 - cpu0) / st.to.Sub(st.from).Seconds()
	st.rss = benchkit.RSSMiB(r.mgr.Pid())
	if r.prof != nil {
		if err := r.prof.finish(ctx, fmt.Sprintf("manager-%d", r.probes)); err != nil {
			r.sum.Figure("profiles: %v", err)
		}
	}
	st.rbpChanges, st.depChanges = rbpChanges.Load(), depChanges.Load()
	r.sum.Figure("probe server connections opened: %d until settled, %d in the steady window", conns0, r.srv.conns.Load()-conns0)
	evs, err := benchkit.ReadAudit(r.c.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		r.sum.Fatalf(r.b, "reading the audit log: %v", err)
	}
	st.writes = benchkit.Writes(benchkit.Between(evs, st.from, st.to))
	settleWrites := benchkit.Writes(benchkit.Between(evs, r.created, st.from))
	r.sum.Figure("manager writes until settled: %s", benchkit.Describe(benchkit.CountBy(settleWrites, (*benchkit.AuditEvent).Key)))
	return st
}

// changeToRestart makes `changed` endpoints fail at once and measures the
// time until a watch sees each restart patch. A flipped Deployment counts
// when its restartedAt annotation differs from the value it had right
// before the flip. Only Deployments never restarted are flipped (one
// restarted before would be in its cooldown), and all probes of a flipped
// Deployment's RebootPolicy fail.
func (r *sizeRun) changeToRestart(ctx context.Context) bool {
	changed := min(benchkit.Size(r.b, "rbp_changed", fullChanged), r.rbps)
	prev := map[string]string{}
	var flipIdx []int
	var deps appsv1.DeploymentList
	if err := r.obs.Reader().List(ctx, &deps); err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	restartedBefore := 0
	for i := range deps.Items {
		d := &deps.Items[i]
		if !isBenchNamespace(d.Namespace) {
			continue
		}
		if _, restarted := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; restarted {
			restartedBefore++
			continue
		}
		if len(flipIdx) == changed {
			continue
		}
		j, err := strconv.Atoi(strings.TrimPrefix(d.Name, "w-"))
		if err != nil {
			continue
		}
		prev[d.Name] = d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
		flipIdx = append(flipIdx, j)
	}
	r.sum.Figure("targets restarted before the flip (a probe failed while settling): %d", restartedBefore)
	if len(flipIdx) < changed {
		r.sum.Fatalf(r.b, "only %d Deployments were never restarted", len(flipIdx))
	}
	var flip atomic.Pointer[time.Time]
	patched := make(chan time.Duration, changed)
	var seenMu sync.Mutex
	seen := map[string]time.Time{}
	if err := r.obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, newObj any) {
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
		if _, ok := seen[d.Name]; !ok {
			seen[d.Name] = time.Now()
			patched <- seen[d.Name].Sub(*t)
		}
	}); err != nil {
		r.sum.Fatalf(r.b, "%v", err)
	}
	if r.prof != nil {
		// An execution trace of the flip's burst: where the manager's
		// goroutines waited (go tool trace -pprof=sched|sync|net), and
		// what ran (a CPU profile alongside).
		r.prof.trace(ctx, fmt.Sprintf("manager-%d-flip", r.probes), 3*time.Second)
	}
	if r.apiProf != nil {
		r.apiProf.StartCPU(ctx, fmt.Sprintf("apiserver-%d-flip", r.probes), 3*time.Second)
	}
	cpuBefore, cpuErr := benchkit.CPUByProcess()
	stealBefore, stealErr := benchkit.MachineSteal()
	now := time.Now()
	flip.Store(&now)
	for _, j := range flipIdx {
		for k := range r.probesOf(j) {
			r.srv.failing[j*r.perRBP+k].Store(true)
		}
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
			r.sum.Target(false, "change→patch: only %d/%d changes patched within 2m", len(lat), changed)
			r.sum.Fatalf(r.b, "only %d/%d changes were patched", len(lat), changed)
		}
	}
	if cpuAfter, err := benchkit.CPUByProcess(); err == nil && cpuErr == nil {
		// Who had the machine's CPU while the restarts were due: the
		// manager's waits are only as short as what is left to it.
		r.sum.Figure("CPU from the flip until the last restart patch was seen: %s", benchkit.DescribeCPUSpent(cpuBefore, cpuAfter, lastSeen.Sub(now), goruntime.NumCPU()))
	}
	// What the host took from this virtual machine meanwhile, so that a
	// slow run says whether its cores were there at all.
	if stealAfter, err := benchkit.MachineSteal(); err == nil && stealErr == nil {
		r.sum.Figure("CPU the hypervisor took from the machine in that time (steal): %s", benchkit.DescribeSteal(stealBefore, stealAfter, lastSeen.Sub(now)))
	} else {
		r.sum.Figure("CPU the hypervisor took from the machine in that time (steal): unknown (%v)", errors.Join(stealErr, err))
	}
	ok := r.sum.Target(benchkit.Percentile(lat, 0.99) <= maxChangePatchP99, "change→restart patch seen by a watch, %d endpoints failing at once: p50 %s p99 %s max %s (target p99 ≤ %s)",
		changed, benchkit.Percentile(lat, 0.5).Round(time.Millisecond), benchkit.Percentile(lat, 0.99).Round(time.Millisecond), benchkit.Percentile(lat, 1).Round(time.Millisecond), maxChangePatchP99)
	evs, err := benchkit.ReadAudit(r.c.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		r.sum.Fatalf(r.b, "reading the audit log: %v", err)
	}
	flipped := benchkit.Between(evs, now, lastSeen)
	flipWrites := benchkit.Writes(flipped)
	r.sum.Figure("manager writes from the flip until the last restart patch was seen: %s", benchkit.Describe(benchkit.CountBy(flipWrites, (*benchkit.AuditEvent).Key)))
	r.sum.Figure("manager reads in that time: %s", benchkit.Describe(benchkit.CountBy(reads(flipped), (*benchkit.AuditEvent).Key)))
	seenMu.Lock()
	steps := r.breakdown(evs, now, flipIdx, seen)
	seenMu.Unlock()
	r.sum.Figure("where the change→restart time went: %s", describeSteps(steps))
	if r.prof != nil {
		if err := r.prof.wait(); err != nil {
			r.sum.Figure("flip trace: %v", err)
		}
	}
	if err := r.apiProf.Wait(); err != nil {
		r.sum.Figure("%v", err)
	}
	r.b.ReportMetric(float64(benchkit.Percentile(lat, 0.50).Milliseconds()), "change-patch-p50-ms")
	r.b.ReportMetric(float64(benchkit.Percentile(lat, 0.99).Milliseconds()), "change-patch-p99-ms")
	return ok
}

// reads are the requests among evs that change nothing.
func reads(evs []benchkit.AuditEvent) []benchkit.AuditEvent {
	var out []benchkit.AuditEvent
	for _, e := range evs {
		if !e.IsWrite() {
			out = append(out, e)
		}
	}
	return out
}
