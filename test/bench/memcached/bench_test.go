// Package memcached benchmarks the Memcached controller as it ships against
// a baseline with the behaviour of the kubebuilder getting-started tutorial
// (./baseline, written for this benchmark), on the local kwok cluster (real
// apiserver, kube-controller-manager and scheduler; kwok nodes on which
// pods go Running).
//
// For each size of the sweep (200 and 1,000 Memcached objects of size 2)
// and each operator, one after the other on the same cluster: the
// operator's binary is started fresh (Runbook's manager with
// --controllers=memcached and every other flag at its default), the
// objects are created at once in a namespace of their own, and the phase
// ends when every object is Available and its Deployment has both replicas
// available (for Runbook also both servers in status.servers; the baseline's
// Available, like the tutorial's, says only that the Deployment exists).
// Measured per phase: the operator's CPU time (utime+stime of its process
// over the phase), its writes per object from the apiserver's audit log
// (status writes and all writes), the time to all Available, and its writes
// during an idle window afterwards. For Runbook also how soon its status is
// true to the pods (truth_test.go: from each pod's readiness change, seen
// by a watch, to the status saying so) and whether any status write it made
// changed nothing. The namespace is then deleted (with the operator still
// running, so the baseline's finalizers are honoured) before the next
// phase.
//
// Runbook's manager runs with the Go runtime environment of the Helm
// chart's defaults (benchkit.ChartRuntimeEnv), the baseline as the
// tutorial deploys it.
//
// Both operators run as config/rbac's ServiceAccount (the baseline gets
// ./baseline/rbac.yaml bound to it too): the audit policy logs that user
// only, and the phases are told apart by time.
//
// Knobs: BENCH_MEMCACHED_SIZES (default "200,1000"; BENCH_SCALE scales
// them), BENCH_MEMCACHED_OPERATORS ("baseline,runbook": the
// baseline first, so that Runbook's CPU is judged against it), BENCH_IDLE
// (default 30s), BENCH_MEMCACHED_MANAGER_ARGS (extra flags for Runbook's
// manager, space separated), BENCH_MEMCACHED_DISABLE_COMPRESSION=true
// (Runbook's kubeconfig asks for uncompressed responses).
package memcached

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	instances = 2
	creators  = 25
	fullIdle  = 30 * time.Second
	// podsPerNode is kwok's default node capacity.
	podsPerNode = 110

	// Runbook's targets (issue 38, docs/memcached.md). CPU from creation
	// until all are Available: at most maxCPUPerTutorial times the
	// tutorial baseline's for the same size in the same sweep (CPU seconds
	// are the machine's, so only a ratio measured side by side means
	// anything). The status true to the pods within maxStatusLag of the
	// change, judged up to statusLagSize objects. No status write that
	// changes nothing, and no write at all when idle.
	maxCPUPerTutorial = 1.5
	maxStatusLag      = time.Second
	statusLagSize     = 200
)

var baselineGVK = schema.GroupVersionKind{Group: "tutorial.bench.runbook.dev", Version: "v1alpha1", Kind: "Memcached"}

// operator is one of the two operators under comparison.
type operator struct {
	name string
	// crd is the path of its CRD, relative to the repository.
	crd string
	// build compiles its binary into dir.
	build func(ctx context.Context, dir string) (string, error)
	// args are its flags beyond kubeconfig, health and metrics.
	args []string
	// newObject is one of its Memcached objects of size instances.
	newObject func(namespace, name string) client.Object
	// available reads an object from the observer's cache: its operator
	// says Available (and, for Runbook, lists every server).
	available func(obj client.Object) bool
	// listObjects lists its objects.
	list func() client.ObjectList
}

func operators(b *testing.B) []operator {
	all := map[string]operator{
		"runbook": {
			name: "runbook", crd: "config/crd/bases/cache.runbook.dev_memcacheds.yaml",
			build: buildManager,
			args:  append([]string{"--controllers=memcached"}, strings.Fields(os.Getenv("BENCH_MEMCACHED_MANAGER_ARGS"))...),
			newObject: func(ns, name string) client.Object {
				return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](instances)}}
			},
			available: func(o client.Object) bool {
				mc, ok := o.(*cachev1alpha1.Memcached)
				return ok && meta.IsStatusConditionTrue(mc.Status.Conditions, cachev1alpha1.ConditionAvailable) && len(mc.Status.Servers) == instances
			},
			list: func() client.ObjectList { return &cachev1alpha1.MemcachedList{} },
		},
		"baseline": {
			name: "tutorial", crd: "test/bench/memcached/baseline/crd.yaml",
			build: buildBaseline,
			newObject: func(ns, name string) client.Object {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(baselineGVK)
				u.SetNamespace(ns)
				u.SetName(name)
				u.Object["spec"] = map[string]any{"size": int64(instances)}
				return u
			},
			available: func(o client.Object) bool {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					return false
				}
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, c := range conds {
					if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
						return true
					}
				}
				return false
			},
			list: func() client.ObjectList {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(baselineGVK.GroupVersion().WithKind("MemcachedList"))
				return l
			},
		},
	}
	var out []operator
	for _, n := range strings.Split(envOr("BENCH_MEMCACHED_OPERATORS", "baseline,runbook"), ",") {
		op, ok := all[strings.TrimSpace(n)]
		if !ok {
			b.Fatalf("BENCH_MEMCACHED_OPERATORS: unknown operator %q (runbook, baseline)", n)
		}
		out = append(out, op)
	}
	return out
}

func buildBaseline(ctx context.Context, dir string) (string, error) {
	bin, _, err := benchkit.BuildRelease(ctx, dir, "./test/bench/memcached/baseline", "baseline")
	return bin, err
}

// buildManager builds the manager as it ships: its pages count in its RSS
// and the baseline is built with the same flags.
func buildManager(ctx context.Context, dir string) (string, error) {
	bin, _, err := benchkit.BuildReleaseManager(ctx, dir)
	return bin, err
}

// sizes is the sweep: BENCH_MEMCACHED_SIZES, each scaled by BENCH_SCALE.
func sizes(b *testing.B) []int {
	var out []int
	for _, f := range strings.Split(envOr("BENCH_MEMCACHED_SIZES", "200,1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("BENCH_MEMCACHED_SIZES=%q: want positive integers separated by commas", os.Getenv("BENCH_MEMCACHED_SIZES"))
		}
		out = append(out, benchkit.Size(b, fmt.Sprintf("memcached_%d", n), n))
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func BenchmarkMemcachedSweep(b *testing.B) {
	for range b.N {
		sweep(b)
	}
}

// bench is what every phase shares: the cluster, the clients, the
// binaries.
type bench struct {
	kc         *cluster.Cluster
	cl         client.Client
	scheme     *runtime.Scheme
	kubeconfig string
	dir        string
	binaries   map[string]string
	idle       time.Duration
	// baselineCPU is the baseline's CPU per size, once it ran.
	baselineCPU map[int]time.Duration
	// runtimeEnv is the Go runtime environment Runbook's manager ran with.
	runtimeEnv string
}

func sweep(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())
	ops, ns := operators(b), sizes(b)
	bn, stop, err := setUp(ctx, b, ops, slices.Max(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	// A sub-benchmark per phase: a missed target fails its own line only.
	for _, n := range ns {
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/n=%d", op.name, n), func(b *testing.B) { bn.phase(ctx, b, op, n) })
		}
	}
}

// setUp starts the cluster (enough kwok nodes for the largest phase),
// installs both CRDs and both RBAC sets, warms the cluster up and builds
// the binaries.
func setUp(ctx context.Context, b *testing.B, ops []operator, largest int) (*bench, func(), error) {
	nodes := (largest*instances+podsPerNode-1)/podsPerNode + 1
	kc, err := cluster.Start(ctx, cluster.Options{Nodes: nodes, NamePrefix: "mcbench", AuditPolicy: benchkit.AuditPolicy(benchkit.ManagerUser)})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the cluster: %w", err)
	}
	bn := &bench{kc: kc, dir: b.TempDir(), binaries: map[string]string{}, idle: benchkit.Window(b, "idle", fullIdle, 10*time.Second),
		baselineCPU: map[int]time.Duration{}}
	fail := func(err error) (*bench, func(), error) { kc.Stop(); return nil, nil, err }
	for _, f := range []string{"config/crd/bases/cache.runbook.dev_memcacheds.yaml", "test/bench/memcached/baseline/crd.yaml"} {
		if _, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), f)); err != nil {
			return fail(err)
		}
	}
	if err := kc.WaitCRDsEstablished(ctx, 60*time.Second); err != nil {
		return fail(err)
	}
	bn.scheme = runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(bn.scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(bn.scheme))
	if bn.cl, err = client.New(kc.Config, client.Options{Scheme: bn.scheme}); err != nil {
		return fail(err)
	}
	if bn.kubeconfig, err = benchkit.ManagerKubeconfig(ctx, kc, bn.dir); err != nil {
		return fail(err)
	}
	if _, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "test/bench/memcached/baseline/rbac.yaml")); err != nil {
		return fail(err)
	}
	if err := warmUp(ctx, kc, bn.cl); err != nil {
		return fail(err)
	}
	for _, op := range ops {
		if bn.binaries[op.name], err = op.build(ctx, bn.dir); err != nil {
			return fail(err)
		}
	}
	return bn, kc.Stop, nil
}

// managerKubeconfig is the ServiceAccount's kubeconfig, without response
// compression when BENCH_MEMCACHED_DISABLE_COMPRESSION=true.
func (bn *bench) managerKubeconfig(op operator) (string, error) {
	if op.name != "runbook" || os.Getenv("BENCH_MEMCACHED_DISABLE_COMPRESSION") != "true" {
		return bn.kubeconfig, nil
	}
	cfg, err := clientcmd.LoadFromFile(bn.kubeconfig)
	if err != nil {
		return "", err
	}
	for _, c := range cfg.Clusters {
		c.DisableCompression = true
	}
	out := filepath.Join(bn.dir, "uncompressed.kubeconfig")
	return out, clientcmd.WriteToFile(*cfg, out)
}

// startOperator starts op's binary (Runbook's with the chart's Go runtime
// environment: set in b, the phase's own sub-benchmark, so that the
// baseline's phases never see it).
func (bn *bench) startOperator(ctx context.Context, b *testing.B, op operator) (*cluster.Manager, error) {
	kubeconfig, err := bn.managerKubeconfig(op)
	if err != nil {
		return nil, err
	}
	if op.name == "runbook" {
		bn.runtimeEnv = benchkit.UseChartRuntimeEnv(b)
	}
	return cluster.StartManager(ctx, bn.binaries[op.name], kubeconfig, op.args...)
}

// phase measures op on n objects and prints its SUMMARY line; Runbook's
// line holds the targets.
func (bn *bench) phase(ctx context.Context, b *testing.B, op operator, n int) {
	sum := benchkit.NewSummary(fmt.Sprintf("memcached %s n=%d", op.name, n))
	defer sum.Finish(b)
	ns := fmt.Sprintf("%s-%d", op.name, n)
	if err := bn.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	mgr, err := bn.startOperator(ctx, b, op)
	if err != nil {
		sum.Fatalf(b, "starting %s: %v", op.name, err)
	}
	measured := false
	defer func() {
		_ = mgr.Stop()
		mgr.DumpLogsOnFailure(!measured)
	}()
	watched := []client.Object{op.newObject(ns, "x"), &appsv1.Deployment{}}
	var tr *truth
	if op.name == "runbook" {
		watched = append(watched, &corev1.Pod{}, &discoveryv1.EndpointSlice{})
	}
	obs, err := benchkit.Observe(ctx, bn.kc.Config, bn.scheme, ns, watched...)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer obs.Stop()
	if op.name == "runbook" {
		tr = newTruth()
		if err := tr.watch(ctx, obs); err != nil {
			sum.Fatalf(b, "%v", err)
		}
	}
	// The caches of a just-ready manager may still be listing: its start
	// is not part of the phase.
	if err := settle(ctx, mgr.Pid()); err != nil {
		sum.Fatalf(b, "%v", err)
	}

	cpu0, err := benchkit.ProcessCPU(mgr.Pid())
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	start := time.Now()
	if err := createAll(ctx, bn.cl, op, ns, n); err != nil {
		sum.Fatalf(b, "creating the Memcached objects: %v", err)
	}
	progress, err := obs.Until(ctx, 5*time.Minute, 30*time.Minute, func() (bool, string, error) {
		return allAvailable(ctx, obs.Reader(), op, ns, n)
	})
	toAvailable := time.Since(start)
	cpu1, cpuErr := benchkit.ProcessCPU(mgr.Pid())
	end := time.Now()
	if err != nil || cpuErr != nil {
		sum.Target(false, "all %d Available: %s after %s", n, progress, toAvailable.Round(time.Second))
		sum.Fatalf(b, "waiting for the Memcached objects: %v %v", err, cpuErr)
	}
	cpu := cpu1 - cpu0
	measured = true

	// Measuring idleness is the point of this wait.
	select {
	case <-time.After(bn.idle):
	case <-mgr.Exited():
		sum.Fatalf(b, "%s exited during the idle window", op.name)
	case <-ctx.Done():
		sum.Fatalf(b, "%v", ctx.Err())
	}
	cpu2, err := benchkit.ProcessCPU(mgr.Pid())
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	idleEnd := time.Now()

	evs, err := benchkit.ReadAudit(bn.kc.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		sum.Fatalf(b, "reading the audit log: %v", err)
	}
	writes := benchkit.Writes(benchkit.Between(evs, start, end))
	idleWrites := benchkit.Writes(benchkit.Between(evs, end, idleEnd))
	perObject := writesPerObject(writes, n, ns, func(*benchkit.AuditEvent) bool { return true })
	statusPer := writesPerObject(writes, n, ns, func(e *benchkit.AuditEvent) bool { return e.Resource() == "memcacheds/status" })
	_, allMean, allMax := stats(perObject)
	statusMin, statusMean, statusMax := stats(statusPer)

	cpuFigure := fmt.Sprintf("CPU %.2f s (%.2f ms per object)", cpu.Seconds(), float64(cpu.Milliseconds())/float64(n))
	statusFigure := fmt.Sprintf("status writes per object min/mean/max %d/%.2f/%d", statusMin, statusMean, statusMax)
	idleFigure := fmt.Sprintf("writes during %s idle %d (CPU %.2f s)", bn.idle, len(idleWrites), (cpu2 - cpu1).Seconds())
	sum.Figure("%d objects of size %d all Available after %s", n, instances, toAvailable.Round(100*time.Millisecond))
	if op.name == "runbook" {
		bn.judgeCPU(sum, cpu, cpuFigure, n)
		judgeTruth(sum, tr, n)
		b.ReportMetric(benchkit.Percentile(tr.report().runbook, 1).Seconds(), "runbook-"+strconv.Itoa(n)+"-status-lag-max-s")
		noop, accepted := noopStatusWrites(benchkit.Writes(benchkit.Between(evs, start, idleEnd)), ns, tr.changedStatuses())
		sum.Target(noop == 0, "status writes that changed nothing %d of %d accepted (target 0); %s", noop, accepted, statusFigure)
		sum.Target(len(idleWrites) == 0, "%s (target 0)", idleFigure)
		sum.Figure("manager ran with the chart's %s", bn.runtimeEnv)
	} else {
		bn.baselineCPU[n] = cpu
		sum.Figure("%s", cpuFigure)
		sum.Figure("%s", statusFigure)
		sum.Figure("%s", idleFigure)
	}
	sum.Figure("all writes per object mean/max %.2f/%d: %s", allMean, allMax, benchkit.Describe(benchkit.CountBy(writes, (*benchkit.AuditEvent).Key)))
	sum.Figure("refused writes: %s", benchkit.Describe(benchkit.Failed(writes)))
	b.ReportMetric(cpu.Seconds(), op.name+"-"+strconv.Itoa(n)+"-cpu-s")
	b.ReportMetric(statusMean, op.name+"-"+strconv.Itoa(n)+"-status-writes/object")
	sum.Finish(b)

	if err := deleteNamespace(ctx, bn.cl, ns); err != nil {
		b.Errorf("cleaning up after %s n=%d: %v", op.name, n, err)
	}
}

// judgeCPU holds Runbook's CPU for n objects to its ratio to the tutorial
// baseline's, measured for n in the same sweep; without that measurement
// the target cannot be judged, which fails it.
func (bn *bench) judgeCPU(sum *benchkit.Summary, cpu time.Duration, figure string, n int) {
	base, ok := bn.baselineCPU[n]
	if !ok || base <= 0 {
		sum.Target(false, "%s: no tutorial baseline for %d objects in this run to judge it by (target ≤ ×%.1f; BENCH_MEMCACHED_OPERATORS=baseline,runbook)",
			figure, n, maxCPUPerTutorial)
		return
	}
	got := float64(cpu) / float64(base)
	sum.Target(got <= maxCPUPerTutorial, "%s, ×%.2f the tutorial baseline's %.2f s in this run (target ≤ ×%.1f, here ≤ %.2f s)",
		figure, got, base.Seconds(), maxCPUPerTutorial, base.Seconds()*maxCPUPerTutorial)
}

// judgeTruth reports how soon the status told the truth about the pods.
// The target is on the controller's part: from the moment Kubernetes
// published a pod's readiness where the controller reads it (the
// Deployment's ready count and the Service's EndpointSlices) to the status
// saying so, for every pod, up to statusLagSize objects; the whole way
// from the pod's Ready condition, which includes kube-controller-manager's
// publishing, is reported beside it.
func judgeTruth(sum *benchkit.Summary, tr *truth, n int) {
	rep := tr.report()
	what := fmt.Sprintf("status true to the pods: %d of %d readiness changes reached status; after Kubernetes published them %s",
		rep.changes-rep.unreflected, rep.changes, describe(rep.runbook))
	ok := rep.unreflected == 0 && rep.changes > 0 && benchkit.Percentile(rep.runbook, 1) <= maxStatusLag
	if n <= statusLagSize {
		sum.Target(ok, "%s (target: all, max ≤ %s)", what, maxStatusLag)
	} else {
		sum.Figure("%s (the target, max ≤ %s, is at ≤ %d objects)", what, maxStatusLag, statusLagSize)
	}
	sum.Figure("pod Ready → status %s, of which pod Ready → Deployment and EndpointSlice (kube-controller-manager) %s",
		describe(rep.endToEnd), describe(rep.kcm))
}

// settle waits until the process has used no CPU for a second (its caches
// are listed and it is waiting for events), at most 30 s.
func settle(ctx context.Context, pid int) error {
	last, err := benchkit.ProcessCPU(pid)
	if err != nil {
		return err
	}
	for range 30 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		now, err := benchkit.ProcessCPU(pid)
		if err != nil {
			return err
		}
		if now-last <= 10*time.Millisecond {
			return nil
		}
		last = now
	}
	return nil
}

func allAvailable(ctx context.Context, r client.Reader, op operator, ns string, n int) (bool, string, error) {
	objs := op.list()
	if err := r.List(ctx, objs, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, "", err
	}
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, "", err
	}
	ready := map[string]bool{}
	for i := range deps.Items {
		if deps.Items[i].Status.AvailableReplicas == instances {
			ready[deps.Items[i].Name] = true
		}
	}
	done := 0
	if err := meta.EachListItem(objs, func(o runtime.Object) error {
		if obj := o.(client.Object); ready[obj.GetName()] && op.available(obj) {
			done++
		}
		return nil
	}); err != nil {
		return false, "", err
	}
	return done == n, fmt.Sprintf("%d/%d Available with %d instances available (%d Deployments so)", done, n, instances, len(ready)), nil
}

// createAll creates n objects of op with `creators` clients in parallel.
func createAll(ctx context.Context, cl client.Client, op operator, ns string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for w := range creators {
		wg.Go(func() {
			for i := w; i < n; i += creators {
				if err := cl.Create(ctx, op.newObject(ns, objectName(i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func objectName(i int) string { return fmt.Sprintf("mc-%04d", i) }

// writesPerObject counts, per Memcached, the writes that match: to the
// object and its status, to the objects of its name (Deployment, Service,
// PDB) and its events (named <object>.<suffix>).
func writesPerObject(writes []benchkit.AuditEvent, n int, ns string, match func(*benchkit.AuditEvent) bool) map[string]int {
	per := make(map[string]int, n)
	for i := range n {
		per[objectName(i)] = 0
	}
	for i := range writes {
		e := &writes[i]
		name := e.Name()
		if e.ObjectRef != nil && e.ObjectRef.Resource == "events" {
			name, _, _ = strings.Cut(name, ".")
		}
		if _, ok := per[name]; ok && e.Namespace() == ns && match(e) {
			per[name]++
		}
	}
	return per
}

func stats(per map[string]int) (lo int, mean float64, hi int) {
	vals := make([]int, 0, len(per))
	total := 0
	for _, v := range per {
		vals = append(vals, v)
		total += v
	}
	if len(vals) == 0 {
		return 0, 0, 0
	}
	sort.Ints(vals)
	return vals[0], float64(total) / float64(len(vals)), vals[len(vals)-1]
}

// deleteNamespace deletes ns and waits until it is gone (its objects
// collected), so that the next phase starts on a quiet cluster.
func deleteNamespace(ctx context.Context, cl client.Client, ns string) error {
	if err := cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		err := cl.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("namespace %s still exists after 10m", ns)
}

// warmUp runs one Deployment to an available pod: the cluster's
// kube-controller-manager, scheduler and kwok all work.
func warmUp(ctx context.Context, kc *cluster.Cluster, cl client.Client) error {
	const ns = "warmup"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	labels := map[string]string{"app": "warmup"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warmup"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if err := cl.Create(ctx, d); err != nil {
		return err
	}
	if _, err := kc.Kubectl(ctx, "wait", "--for=condition=Available", "deployment/warmup", "-n", ns, "--timeout=180s"); err != nil {
		return fmt.Errorf("a plain Deployment got no available pod in 3m: is kube-controller-manager of the kwok cluster running? %w", err)
	}
	return cl.Delete(ctx, d)
}
