package rebootpolicy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// Sizes and targets of the referenced-trigger benchmark (docs/rebootpolicy.md).
const (
	refFullDeployments = 1000
	refFullOwnChanges  = 100
	refOwnSpacing      = 200 * time.Millisecond
	refNamespace       = "bench-refs"
	maxOwnChangeP99    = time.Second
	// maxReferencedCPUCores: the steady state of this benchmark (watches,
	// no network probes) keeps the earlier target of one core.
	maxReferencedCPUCores = 1.0
)

// refFleet is what the benchmark watches: each Deployment's restartedAt
// stamps seen after a moment, and how many are restarted and still
// rolling out at once — by the manager's own definition: the controller
// has not observed the template, or not every replica runs it available.
type refFleet struct {
	mu       sync.Mutex
	since    map[string]string   // stamp right before the change
	stamps   map[string][]string // distinct stamps seen after it
	rolling  map[string]bool
	maxRoll  int
	counting atomic.Bool
}

func newRefFleet() *refFleet {
	return &refFleet{since: map[string]string{}, stamps: map[string][]string{}, rolling: map[string]bool{}}
}

func stampOf(d *appsv1.Deployment) string {
	return d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
}

func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas >= want && d.Status.Replicas == want
}

// start records the stamps of deps as the baseline and starts counting.
func (f *refFleet) start(deps []appsv1.Deployment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range deps {
		f.since[deps[i].Name] = stampOf(&deps[i])
	}
	f.stamps, f.rolling, f.maxRoll = map[string][]string{}, map[string]bool{}, 0
	f.counting.Store(true)
}

func (f *refFleet) update(d *appsv1.Deployment) {
	if !f.counting.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := stampOf(d)
	if st == "" || st == f.since[d.Name] {
		return
	}
	if prev := f.stamps[d.Name]; len(prev) == 0 || prev[len(prev)-1] != st {
		f.stamps[d.Name] = append(prev, st)
	}
	f.rolling[d.Name] = !rolledOut(d)
	n := 0
	for _, r := range f.rolling {
		if r {
			n++
		}
	}
	f.maxRoll = max(f.maxRoll, n)
}

// state: restarted (a new stamp), rolled out again, restarted more than
// once, the most in progress at once.
func (f *refFleet) state() (restarted, done, repeated, maxRolling int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, st := range f.stamps {
		restarted++
		if len(st) > 1 {
			repeated++
		}
		if !f.rolling[name] {
			done++
		}
	}
	return restarted, done, repeated, f.maxRoll
}

func BenchmarkRebootPolicyReferenced1000Deployments(b *testing.B) {
	for range b.N {
		runReferencedBench(b, false)
	}
}

// BenchmarkReloaderCompat1000Deployments is the same run in the Reloader
// compatibility mode: the Deployments carry reloader.stakater.com/auto
// and the manager makes their RebootPolicies (--reloader-compat).
func BenchmarkReloaderCompat1000Deployments(b *testing.B) {
	for range b.N {
		runReferencedBench(b, true)
	}
}

// refBench is one run's cluster, manager and watch.
type refBench struct {
	sum   *benchkit.Summary
	c     *cluster.Cluster
	k8s   client.Client
	mgr   *cluster.Manager
	obs   *benchkit.Observer
	fleet *refFleet
	n     int
	limit int
	// compat: annotated Deployments, RebootPolicies made by the manager.
	compat bool
}

func runReferencedBench(b *testing.B, compat bool) {
	deployments := benchkit.Size(b, "rbp_ref_deployments", refFullDeployments)
	ownChanges := min(benchkit.Size(b, "rbp_ref_changes", refFullOwnChanges), deployments)
	steady := benchkit.Window(b, "steady", fullSteady, 10*time.Second)
	// 50 at 1,000 Deployments; a smaller run keeps the same proportion.
	limit := max(5, deployments/20)
	name := "rebootpolicy-referenced"
	if compat {
		name = "reloadercompat-auto"
	}
	rb := &refBench{sum: benchkit.NewSummary(name), fleet: newRefFleet(), n: deployments, limit: limit, compat: compat}
	defer rb.sum.Finish(b)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	rb.setup(ctx, b)
	defer rb.c.Stop()
	defer func() {
		_ = rb.mgr.Stop()
		_ = os.WriteFile(filepath.Join(os.TempDir(), "rbp-referenced-bench-manager.log"), []byte(rb.mgr.Logs()), 0o644)
	}()
	defer rb.obs.Stop()

	created := time.Now()
	rb.createFleet(ctx, b)
	rb.settle(ctx, b, created)

	// Steady state: nothing changes; measuring it is the point of this wait.
	cpu0, _ := benchkit.CPUSeconds(rb.mgr.Pid())
	from := time.Now()
	select {
	case <-time.After(steady):
	case <-rb.mgr.Exited():
		rb.sum.Fatalf(b, "the manager exited during the steady window")
	}
	to := time.Now()
	cpu1, _ := benchkit.CPUSeconds(rb.mgr.Pid())
	cores := (cpu1 - cpu0) / to.Sub(from).Seconds()
	rss := benchkit.RSSMiB(rb.mgr.Pid())

	lat := rb.ownChanges(ctx, b, ownChanges)
	sharedFrom := time.Now()
	took, peakRSS, sharedCores := rb.sharedChange(ctx, b)
	sharedTo := time.Now()
	counted := rb.restartCounts(ctx, ownChanges)

	evs, err := benchkit.ReadAudit(rb.c.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		rb.sum.Fatalf(b, "reading the audit log: %v", err)
	}
	steadyWrites := benchkit.Writes(benchkit.Between(evs, from, to))
	settleWrites := benchkit.Writes(benchkit.Between(evs, created, from))
	sharedWrites := benchkit.Writes(benchkit.Between(evs, sharedFrom, sharedTo))
	restarted, done, repeated, maxRolling := rb.fleet.state()

	rb.sum.Figure("manager writes until settled: %s", benchkit.Describe(benchkit.CountBy(settleWrites, (*benchkit.AuditEvent).Key)))
	rb.sum.Target(len(steadyWrites) == 0, "manager writes during %s of steady state: %d (%s; target 0)",
		steady, len(steadyWrites), benchkit.Describe(benchkit.CountBy(steadyWrites, (*benchkit.AuditEvent).Key)))
	rb.sum.Target(cores < maxReferencedCPUCores, "manager CPU in the steady state %.3f cores (target < %.0f)", cores, maxReferencedCPUCores)
	rb.sum.Figure("manager RSS %.0f MiB in the steady state, %.0f MiB at most during the shared change", rss, peakRSS)
	rb.sum.Target(benchkit.Percentile(lat, 0.99) <= maxOwnChangeP99,
		"own ConfigMap change→restart patch seen by a watch, %d changes %s apart: p50 %s p99 %s max %s (target p99 ≤ %s)",
		len(lat), refOwnSpacing, benchkit.Percentile(lat, 0.5).Round(time.Millisecond), benchkit.Percentile(lat, 0.99).Round(time.Millisecond),
		benchkit.Percentile(lat, 1).Round(time.Millisecond), maxOwnChangeP99)
	rb.sum.Target(maxRolling <= limit && maxRolling > 0, "shared ConfigMap change: at most %d rollouts in progress at once (target ≤ %d, --max-concurrent-restarts)",
		maxRolling, limit)
	rb.sum.Target(restarted == deployments && done == deployments && repeated == 0,
		"shared ConfigMap change: %d/%d Deployments restarted and rolled out, %d more than once, in %s (target all, exactly once)",
		restarted, deployments, repeated, took.Round(time.Second))
	rb.sum.Target(counted == "", "every RebootPolicy counted its restarts once (status.restartCount: 2 after an own and the shared change, 1 after the shared one)%s", counted)
	rb.sum.Figure("manager CPU during the shared change %.2f cores; writes: %s", sharedCores,
		benchkit.Describe(benchkit.CountBy(sharedWrites, (*benchkit.AuditEvent).Key)))
	b.ReportMetric(float64(benchkit.Percentile(lat, 0.99).Milliseconds()), "own-change-p99-ms")
	b.ReportMetric(float64(maxRolling), "max-in-progress")
	b.ReportMetric(cores, "cpu-cores")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(float64(len(steadyWrites)), "steady-writes")
}

func (rb *refBench) setup(ctx context.Context, b *testing.B) {
	var err error
	rb.c, err = cluster.Start(ctx, cluster.Options{Nodes: 1, NamePrefix: "rbp-ref-bench", AuditPolicy: benchkit.AuditPolicy(benchkit.ManagerUser)})
	if err != nil {
		rb.sum.Fatalf(b, "starting the cluster: %v", err)
	}
	if _, err := rb.c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config/crd/bases/autoreboot.runbook.dev_rebootpolicies.yaml")); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	if _, err := rb.c.Kubectl(ctx, "wait", "--for=condition=Established", "crd/rebootpolicies.autoreboot.runbook.dev", "--timeout=60s"); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = autorebootv1alpha1.AddToScheme(scheme)
	if rb.k8s, err = client.New(rb.c.Config, client.Options{Scheme: scheme}); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	dir := b.TempDir()
	kubeconfig, err := benchkit.ManagerKubeconfig(ctx, rb.c, dir)
	if err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	bin, _, err := benchkit.BuildReleaseManager(ctx, dir)
	if err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	// All policies live in one namespace, so its share is lifted.
	rb.sum.Figure("manager runs with the chart's %s", benchkit.UseChartRuntimeEnv(b))
	args := []string{"--controllers=rebootpolicy", "--zap-log-level=info",
		"--operator-namespace=" + benchkit.ManagerNamespace, "--probe-max-per-namespace=0",
		fmt.Sprintf("--max-concurrent-restarts=%d", rb.limit)}
	if rb.compat {
		args = append(args, "--reloader-compat", "--reloader-compat-max-per-namespace=0")
	}
	rb.sum.Figure("manager flags %v", args[1:])
	rb.mgr, err = cluster.StartManager(ctx, bin, kubeconfig, args...)
	if err != nil {
		rb.sum.Fatalf(b, "starting the manager: %v", err)
	}
	if err := rb.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: refNamespace}}); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	if rb.obs, err = benchkit.Observe(ctx, rb.c.Config, scheme, refNamespace, &autorebootv1alpha1.RebootPolicy{}, &appsv1.Deployment{}); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	if err := rb.obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, newObj any) {
		if d, ok := newObj.(*appsv1.Deployment); ok {
			rb.fleet.update(d)
		}
	}); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
}

// createFleet: one shared ConfigMap; per Deployment two of its own, read
// by an env key and a volume, the shared one by envFrom; a RebootPolicy
// per Deployment with a referenced trigger and no cooldown.
func (rb *refBench) createFleet(ctx context.Context, b *testing.B) {
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: refNamespace, Name: name}, Data: map[string]string{"v": "0", "unused": "x"}}
	}
	if err := rb.k8s.Create(ctx, cm("shared")); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	err := parallel(rb.n, 16, func(i int) error {
		name := fmt.Sprintf("d-%d", i)
		for _, own := range []string{name + "-env", name + "-file"} {
			if err := rb.k8s.Create(ctx, cm(own)); err != nil {
				return err
			}
		}
		dep := refDeployment(name)
		if rb.compat {
			dep.Annotations = map[string]string{"reloader.stakater.com/auto": "true"}
			return rb.k8s.Create(ctx, dep)
		}
		if err := rb.k8s.Create(ctx, dep); err != nil {
			return err
		}
		return rb.k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: refNamespace, Name: name},
			Spec: autorebootv1alpha1.RebootPolicySpec{
				Target:             autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: name},
				MinRestartInterval: &metav1.Duration{},
				Policies: []autorebootv1alpha1.Policy{{Name: "refs", Trigger: autorebootv1alpha1.Trigger{
					Referenced: &autorebootv1alpha1.ReferencedTrigger{}}}},
			},
		})
	})
	if err != nil {
		rb.sum.Fatalf(b, "creating the fleet: %v", err)
	}
}

func refDeployment(name string) *appsv1.Deployment {
	dep := benchDeployment(refNamespace, name)
	c := &dep.Spec.Template.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}
	c.Env = []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name + "-env"}, Key: "v"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "file", MountPath: "/etc/app"}}
	dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "file", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name + "-file"}}}}}
	return dep
}

// settle waits until every policy tracks its target (3 references) and
// the Deployment controller has observed every Deployment.
func (rb *refBench) settle(ctx context.Context, b *testing.B, created time.Time) {
	var allTracked time.Duration
	progress, err := rb.obs.Until(ctx, 3*time.Minute, 15*time.Minute, func() (bool, string, error) {
		var rbps autorebootv1alpha1.RebootPolicyList
		if err := rb.obs.Reader().List(ctx, &rbps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		var deps appsv1.DeploymentList
		if err := rb.obs.Reader().List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		tracked, observed := 0, 0
		for i := range rbps.Items {
			ps := rbps.Items[i].Status.Policies
			if len(ps) == 1 && ps[0].LastResult == autorebootv1alpha1.ResultSuccess && len(ps[0].Targets) == 1 && ps[0].Targets[0].Fingerprint != "" {
				tracked++
			}
		}
		for i := range deps.Items {
			if rolledOut(&deps.Items[i]) {
				observed++
			}
		}
		if tracked == rb.n && allTracked == 0 {
			allTracked = time.Since(created)
		}
		return tracked == rb.n && observed == rb.n,
			fmt.Sprintf("%d/%d policies track their target, %d/%d Deployments observed by their controller", tracked, rb.n, observed, rb.n), nil
	})
	if err != nil {
		rb.sum.Target(false, "settle: %s after %s", progress, time.Since(created).Round(time.Second))
		rb.sum.Fatalf(b, "settling: %v", err)
	}
	rb.sum.Figure("%d Deployments, %d ConfigMaps and %d RebootPolicies created; every policy tracked its 3 references after %s, settled after %s",
		rb.n, 2*rb.n+1, rb.n, allTracked.Round(time.Second), time.Since(created).Round(time.Second))
}

// ownChanges changes the env-referenced ConfigMap of n Deployments, one
// every refOwnSpacing, and returns change → restart patch as the watch saw
// it; then waits until those rollouts are done.
func (rb *refBench) ownChanges(ctx context.Context, b *testing.B, n int) []time.Duration {
	var mu sync.Mutex
	changedAt := map[string]time.Time{}
	before := map[string]string{}
	lat := make(chan time.Duration, n)
	var deps appsv1.DeploymentList
	if err := rb.obs.Reader().List(ctx, &deps); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	for i := range deps.Items {
		before[deps.Items[i].Name] = stampOf(&deps.Items[i])
	}
	if err := rb.obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, newObj any) {
		d, ok := newObj.(*appsv1.Deployment)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		at, changed := changedAt[d.Name]
		if changed && stampOf(d) != before[d.Name] {
			delete(changedAt, d.Name)
			lat <- time.Since(at)
		}
	}); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	// The changes come at a steady pace (what is measured is the latency of
	// one change, not a burst).
	pace := time.NewTicker(refOwnSpacing)
	defer pace.Stop()
	for i := range n {
		<-pace.C
		name := fmt.Sprintf("d-%d", i)
		var cm corev1.ConfigMap
		if err := rb.k8s.Get(ctx, client.ObjectKey{Namespace: refNamespace, Name: name + "-env"}, &cm); err != nil {
			rb.sum.Fatalf(b, "%v", err)
		}
		cm.Data["v"] = "1"
		mu.Lock()
		changedAt[name] = time.Now()
		mu.Unlock()
		if err := rb.k8s.Update(ctx, &cm); err != nil {
			rb.sum.Fatalf(b, "%v", err)
		}
	}
	var out []time.Duration
	deadline := time.After(2 * time.Minute)
	for len(out) < n {
		select {
		case d := <-lat:
			out = append(out, d)
		case <-deadline:
			rb.sum.Target(false, "own changes: only %d/%d restarted within 2m", len(out), n)
			rb.sum.Fatalf(b, "only %d/%d own changes restarted", len(out), n)
		}
	}
	rb.waitRolledOut(ctx, b)
	return out
}

func (rb *refBench) waitRolledOut(ctx context.Context, b *testing.B) {
	if _, err := rb.obs.Until(ctx, 2*time.Minute, 10*time.Minute, func() (bool, string, error) {
		var deps appsv1.DeploymentList
		if err := rb.obs.Reader().List(ctx, &deps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		done := 0
		for i := range deps.Items {
			if rolledOut(&deps.Items[i]) {
				done++
			}
		}
		return done == rb.n, fmt.Sprintf("%d/%d Deployments rolled out", done, rb.n), nil
	}); err != nil {
		rb.sum.Fatalf(b, "waiting for rollouts: %v", err)
	}
}

// sharedChange changes the ConfigMap every Deployment references and
// waits until each has been restarted and rolled out; it returns how long
// that took, the peak RSS and the CPU used meanwhile.
func (rb *refBench) sharedChange(ctx context.Context, b *testing.B) (time.Duration, float64, float64) {
	var deps appsv1.DeploymentList
	if err := rb.obs.Reader().List(ctx, &deps); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	rb.fleet.start(deps.Items)
	var cm corev1.ConfigMap
	if err := rb.k8s.Get(ctx, client.ObjectKey{Namespace: refNamespace, Name: "shared"}, &cm); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	cm.Data["v"] = "1"
	cpu0, _ := benchkit.CPUSeconds(rb.mgr.Pid())
	start := time.Now()
	if err := rb.k8s.Update(ctx, &cm); err != nil {
		rb.sum.Fatalf(b, "%v", err)
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if r := uint64(benchkit.RSSMiB(rb.mgr.Pid())); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	progress, err := rb.obs.Until(ctx, 3*time.Minute, 30*time.Minute, func() (bool, string, error) {
		restarted, done, repeated, maxRolling := rb.fleet.state()
		return done == rb.n && restarted == rb.n, fmt.Sprintf("%d/%d restarted, %d rolled out, %d repeated, at most %d in progress",
			restarted, rb.n, done, repeated, maxRolling), nil
	})
	close(stop)
	took := time.Since(start)
	cpu1, _ := benchkit.CPUSeconds(rb.mgr.Pid())
	if err != nil {
		rb.sum.Target(false, "shared change: %s", progress)
		rb.sum.Fatalf(b, "shared change: %v", err)
	}
	return took, float64(peak.Load()), (cpu1 - cpu0) / took.Seconds()
}

// restartCounts waits until every RebootPolicy's status counts what was
// restarted: 2 for the first own Deployments, 1 for the others. It
// returns "" or what differs.
func (rb *refBench) restartCounts(ctx context.Context, own int) string {
	progress, err := rb.obs.Until(ctx, time.Minute, 5*time.Minute, func() (bool, string, error) {
		var rbps autorebootv1alpha1.RebootPolicyList
		if err := rb.obs.Reader().List(ctx, &rbps, client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		wrong := 0
		for i := range rbps.Items {
			want := int64(1)
			var idx int
			if _, err := fmt.Sscanf(strings.TrimPrefix(rbps.Items[i].Name, "reloader-deploy-"), "d-%d", &idx); err == nil && idx < own {
				want = 2
			}
			if rbps.Items[i].Status.RestartCount != want {
				wrong++
			}
		}
		return wrong == 0, fmt.Sprintf("%d RebootPolicies count otherwise", wrong), nil
	})
	if err != nil {
		return ": " + progress
	}
	return ""
}
