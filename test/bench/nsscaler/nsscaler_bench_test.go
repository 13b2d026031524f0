// Package nsscaler benchmarks the NSScaler controller on the local control
// plane (envtest: a real kube-apiserver and etcd, nothing else writing):
// 500 namespaces × 10 Deployments under one schedule, parked when its
// sleep window opens and restored when it closes by the real manager
// binary (on the real clock: the window is placed a little ahead of the
// NSScaler's creation), against the raw limit of a bare client that patches the same
// objects with the same bodies at the same concurrency while paying the
// same watch fan-out: a Deployment informer like the manager's (protobuf,
// the same trimming transform) is open in the benchmark process during the
// raw run, and the raw run, like the controller's, is over when that
// informer has observed every write. The raw limit without any watcher is
// reported too, for comparison.
//
// Writes are counted from the apiserver's own request counters
// (apiserver_request_total by verb and resource): during the manager's
// phases nothing but the manager writes: the benchmark creates the
// NSScaler before the counts of the park begin and deletes it after those
// of the restore end. Between the park and the window's end the manager
// must write nothing at all (no workload, no status, no event): at full
// size that is at least the minute before the transition.
//
// BENCH_SCALE=0.1 (or BENCH_NSSCALER_NAMESPACES=n, BENCH_IDLE=20s) runs a
// smaller smoke test.
package nsscaler

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	fullNamespaces = 500
	perNamespace   = 10
	// concurrency is the manager's default --nsscaler-write-concurrency,
	// used for the raw baseline too.
	concurrency = 16
	fullIdle    = 60 * time.Second

	// Targets (docs/nsscaler.md).
	maxRatio  = 1.3
	maxRSSMiB = 100

	annotation = "scaling.runbook.dev/original"
)

func BenchmarkParkRestore500x10(b *testing.B) {
	for range b.N {
		runOnce(b)
	}
}

func runOnce(b *testing.B) {
	namespaces := benchkit.Size(b, "nsscaler_namespaces", fullNamespaces)
	workloads := namespaces * perNamespace
	idle := benchkit.Window(b, "idle", fullIdle, 10*time.Second)
	sum := benchkit.NewSummary("nsscaler")
	defer sum.Finish(b)

	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // no client-side rate limit: the raw limit is the apiserver's
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)

	// Objects.
	start := time.Now()
	keys := make([]client.ObjectKey, 0, workloads)
	for n := range namespaces {
		ns := fmt.Sprintf("bench-%03d", n)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			sum.Fatalf(b, "%v", err)
		}
		for d := range perNamespace {
			keys = append(keys, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("d%02d", d)})
		}
	}
	if err := parallel(keys, func(k client.ObjectKey) error {
		return c.Create(ctx, deployment(k, replicasFor(k)))
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	sum.Figure("%d namespaces × %d Deployments created in %s", namespaces, perNamespace, time.Since(start).Round(time.Millisecond))

	// Raw limit: a bare client, same concurrency, the same one-patch-per-
	// object writes the controller makes (annotation + replicas, metadata-
	// only response), park then restore; first with no watcher (as it was
	// measured before, for comparison), then with the manager's fan-out.
	park := func(k client.ObjectKey) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"v\":1,\"replicas\":%d,\"by\":\"raw\"}"}},"spec":{"replicas":0}}`, annotation, replicasFor(k))
		return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	restore := func(k client.ObjectKey) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, annotation, replicasFor(k))
		return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	bareParkD, err := timed(func() error { return parallel(keys, park) })
	if err != nil {
		sum.Fatalf(b, "raw park: %v", err)
	}
	bareRestoreD, err := timed(func() error { return parallel(keys, restore) })
	if err != nil {
		sum.Fatalf(b, "raw restore: %v", err)
	}
	rawPark, rawParkPatches, rawRestore, rawRestorePatches, err := rawWithFanOut(ctx, env.Config, scheme, keys, park, restore)
	if err != nil {
		sum.Fatalf(b, "raw run with the manager's watch: %v", err)
	}

	// The real manager binary.
	dir := b.TempDir()
	user, err := env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	// NSSCALER_BENCH_GOMEMLIMIT runs the manager with a Go memory limit, as
	// a container whose GOMEMLIMIT follows its memory limit would. Set after
	// the control plane started, so only the manager inherits it.
	if limit := os.Getenv("NSSCALER_BENCH_GOMEMLIMIT"); limit != "" {
		b.Setenv("GOMEMLIMIT", limit)
		sum.Figure("manager runs with GOMEMLIMIT=%s", limit)
	}
	bin, err := cluster.BuildManager(ctx, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	mgr, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler", "--operator-namespace=runbook-system",
		fmt.Sprintf("--nsscaler-write-concurrency=%d", concurrency))
	if err != nil {
		sum.Fatalf(b, "starting the manager: %v", err)
	}
	defer func() {
		_ = mgr.Stop()
		mgr.DumpLogsOnFailure(b.Failed())
	}()
	startRSS, _, err := memory(mgr.Pid())
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	sampler := sampleMemory(mgr.Pid())
	// Completion is read from the NSScaler's status, watched: one small
	// object, so the measurement adds no load of its own.
	obs, err := benchkit.Observe(ctx, env.Config, scheme, "", &scalingv1alpha1.NSScaler{})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer obs.Stop()

	w := newWindow(rawPark, idle)
	sum.Figure("sleep window %s–%s UTC", w.opens.UTC().Format(time.TimeOnly), w.closes.UTC().Format(time.TimeOnly))
	run := runSchedule(ctx, b, sum, c, cs, obs, w, keys, sampler)
	// Awake again, the NSScaler has nothing left to restore: its deletion
	// only releases its finalizer.
	if err := c.Delete(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if _, err := obs.Until(ctx, time.Minute, 2*time.Minute, func() (bool, string, error) {
		err := obs.Reader().Get(ctx, client.ObjectKey{Name: "bench"}, &scalingv1alpha1.NSScaler{})
		return apierrors.IsNotFound(err), "NSScaler still there", client.IgnoreNotFound(err)
	}); err != nil {
		sum.Fatalf(b, "deleting the awake NSScaler: %v", err)
	}
	parkD, restoreD, parked, idled, restored := run.park, run.restore, run.parked, run.idled, run.restored
	rss, hwm, err := memory(mgr.Pid())
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	phases := sampler.stop()

	parkRatio, restoreRatio := parkD.Seconds()/rawPark.Seconds(), restoreD.Seconds()/rawRestore.Seconds()
	parkWrites, restoreWrites := deploymentWrites(parked), deploymentWrites(restored)
	sum.Figure("raw limit without a watcher: park %s, restore %s", bareParkD.Round(time.Millisecond), bareRestoreD.Round(time.Millisecond))
	sum.Target(parkRatio <= maxRatio, "park %s vs raw %s (patches answered after %s) ×%.2f (target ≤ %.1f)",
		parkD.Round(time.Millisecond), rawPark.Round(time.Millisecond), rawParkPatches.Round(time.Millisecond), parkRatio, maxRatio)
	sum.Target(restoreRatio <= maxRatio, "restore %s vs raw %s (patches answered after %s) ×%.2f (target ≤ %.1f)",
		restoreD.Round(time.Millisecond), rawRestore.Round(time.Millisecond), rawRestorePatches.Round(time.Millisecond), restoreRatio, maxRatio)
	sum.Target(parkWrites == workloads, "Deployment writes for the park %d = %.3f/workload (target exactly 1)", parkWrites, float64(parkWrites)/float64(workloads))
	sum.Target(restoreWrites == workloads, "Deployment writes for the restore %d = %.3f/workload (target exactly 1)", restoreWrites, float64(restoreWrites)/float64(workloads))
	sum.Figure("manager writes in the park: %s; in the restore: %s", describe(parked), describe(restored))
	sum.Target(total(idled) == 0 && run.idleWindow >= idle, "writes during the %s before the window closed: %d, of which status %d (%s; target 0 in at least %s)",
		run.idleWindow.Round(time.Second), total(idled), statusWrites(idled), describe(idled), idle)
	sum.Target(hwm <= maxRSSMiB, "manager RSS after cache sync %.1f MiB, at the end %.1f MiB, peak %.1f MiB (target ≤ %d MiB); largest per phase: %s",
		startRSS, rss, hwm, maxRSSMiB, phases)

	b.ReportMetric(parkD.Seconds(), "park-s")
	b.ReportMetric(restoreD.Seconds(), "restore-s")
	b.ReportMetric(rawPark.Seconds(), "raw-park-s")
	b.ReportMetric(rawRestore.Seconds(), "raw-restore-s")
	b.ReportMetric(parkRatio, "park/raw")
	b.ReportMetric(restoreRatio, "restore/raw")
	b.ReportMetric(float64(parkWrites)/float64(workloads), "park-writes/workload")
	b.ReportMetric(float64(restoreWrites)/float64(workloads), "restore-writes/workload")
	b.ReportMetric(float64(total(idled)), "idle-writes")
	b.ReportMetric(startRSS, "start-rss-MiB")
	b.ReportMetric(hwm, "peak-rss-MiB")
	sum.Finish(b)
}

// rawWithFanOut runs the raw park and restore while a Deployment informer
// like the manager's is open in this process: the same watch (protobuf,
// every Deployment), decoding every event and trimming it with the same
// transform, on the same cores. Each phase ends, as the controller's does,
// once that informer has observed the state the writes produced; the time
// the last patch was answered is returned too.
func rawWithFanOut(ctx context.Context, base *rest.Config, scheme *runtime.Scheme, keys []client.ObjectKey,
	park, restore func(client.ObjectKey) error) (parkD, parkPatches, restoreD, restorePatches time.Duration, err error) {
	cfg := rest.CopyConfig(base)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	obs, err := benchkit.ObserveWith(ctx, cfg, cache.Options{Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Transform: trimDeployment}}}, &appsv1.Deployment{})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer obs.Stop()
	phase := func(write func(client.ObjectKey) error, parked bool) (all, patches time.Duration, err error) {
		start := time.Now()
		if err := parallel(keys, write); err != nil {
			return 0, 0, err
		}
		patches = time.Since(start)
		_, err = obs.Until(ctx, time.Minute, 5*time.Minute, func() (bool, string, error) {
			var l appsv1.DeploymentList
			if err := obs.Reader().List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
				return false, "", err
			}
			n := 0
			for i := range l.Items {
				if inState(&l.Items[i], parked) {
					n++
				}
			}
			return n == len(keys), fmt.Sprintf("%d/%d observed", n, len(keys)), nil
		})
		return time.Since(start), patches, err
	}
	if parkD, parkPatches, err = phase(park, true); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("park: %w", err)
	}
	if restoreD, restorePatches, err = phase(restore, false); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("restore: %w", err)
	}
	return parkD, parkPatches, restoreD, restorePatches, nil
}

// trimDeployment keeps what the manager's workload cache keeps of a
// Deployment (internal/controller/nsscaler: trimObject): identity, owner
// references, labels (for excludeSelector), replicas and the original
// annotation.
func trimDeployment(o any) (any, error) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return o, nil
	}
	d.ManagedFields = nil
	if v, ok := d.Annotations[annotation]; ok {
		d.Annotations = map[string]string{annotation: v}
	} else {
		d.Annotations = nil
	}
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}
	d.Status = appsv1.DeploymentStatus{}
	return d, nil
}

func replicasFor(k client.ObjectKey) int32 {
	return int32(len(k.Namespace)+int(k.Name[len(k.Name)-1]))%4 + 1
}

func deployment(k client.ObjectKey, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": k.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}
}

// parallel runs f over keys with `concurrency` workers and returns the first error.
func parallel(keys []client.ObjectKey, f func(client.ObjectKey) error) error {
	work := make(chan client.ObjectKey)
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for k := range work {
				if err := f(k); err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// inState reports whether d is parked (0 replicas with the annotation) or
// restored (its original count, no annotation).
func inState(d *appsv1.Deployment, parked bool) bool {
	_, annotated := d.Annotations[annotation]
	if d.Spec.Replicas == nil {
		return false
	}
	if parked {
		return *d.Spec.Replicas == 0 && annotated
	}
	return *d.Spec.Replicas == replicasFor(client.ObjectKeyFromObject(d)) && !annotated
}

// countReplicas counts the benchmark's Deployments that are parked or
// restored (one list, after a phase).
func countReplicas(ctx context.Context, b *testing.B, c client.Client, keys []client.ObjectKey, parked bool) int {
	var l appsv1.DeploymentList
	if err := c.List(ctx, &l); err != nil {
		b.Fatal(err)
	}
	want := make(map[client.ObjectKey]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	n := 0
	for i := range l.Items {
		if want[client.ObjectKeyFromObject(&l.Items[i])] && inState(&l.Items[i], parked) {
			n++
		}
	}
	return n
}

// requestCounts are the apiserver's mutating requests by "VERB resource"
// (apiserver_request_total, every code), without what the apiserver itself
// writes in the background (its identity lease) and the review requests
// of authentication.
type requestCounts map[string]int

// since is what was written between before and rc.
func (rc requestCounts) since(before requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range rc {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func total(rc requestCounts) int {
	n := 0
	for _, v := range rc {
		n += v
	}
	return n
}

// deploymentWrites is every write to Deployments, whatever the verb.
func deploymentWrites(rc requestCounts) int {
	n := 0
	for k, v := range rc {
		if _, resource, _ := strings.Cut(k, " "); resource == "deployments" || strings.HasPrefix(resource, "deployments/") {
			n += v
		}
	}
	return n
}

func describe(rc requestCounts) string {
	m := map[string]int{}
	for k, v := range rc {
		if v != 0 {
			m[k] = v
		}
	}
	return benchkit.Describe(m)
}

func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// requests reads the apiserver's request counters.
func requests(ctx context.Context, b *testing.B, cs kubernetes.Interface) requestCounts {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rc := requestCounts{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		verb, resource := label(line, "verb"), label(line, "resource")
		switch verb {
		case "PATCH", "POST", "PUT", "DELETE", "APPLY", "DELETECOLLECTION":
		default:
			continue
		}
		switch resource {
		case "leases", "subjectaccessreviews", "tokenreviews", "selfsubjectaccessreviews":
			continue
		}
		if sub := label(line, "subresource"); sub != "" {
			resource += "/" + sub
		}
		rc[verb+" "+resource] += int(v)
	}
	return rc
}

// memorySampler polls a process's resident set and keeps the largest per
// phase, split into anonymous memory (heap, stacks) and file-backed pages
// (the mapped binary), to tell where a peak comes from.
type memorySampler struct {
	mu    sync.Mutex
	cur   string
	order []string
	max   map[string][3]float64 // rss, anon, file (MiB)
	done  chan struct{}
	wg    sync.WaitGroup
}

func sampleMemory(pid int) *memorySampler {
	m := &memorySampler{cur: "park", order: []string{"park"}, max: map[string][3]float64{}, done: make(chan struct{})}
	m.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
			st, err := procStatusMiB(pid)
			if err != nil {
				continue
			}
			v := [3]float64{st["VmRSS"], st["RssAnon"], st["RssFile"]}
			m.mu.Lock()
			if v[0] > m.max[m.cur][0] {
				m.max[m.cur] = v
			}
			m.mu.Unlock()
		}
	})
	return m
}

func (m *memorySampler) phase(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = name
	m.order = append(m.order, name)
}

func (m *memorySampler) stop() string {
	close(m.done)
	m.wg.Wait()
	var parts []string
	for _, p := range m.order {
		v := m.max[p]
		parts = append(parts, fmt.Sprintf("%s %.1f (anon %.1f, file %.1f)", p, v[0], v[1], v[2]))
	}
	return strings.Join(parts, ", ")
}

// memory returns the manager's resident and peak resident set in MiB.
func memory(pid int) (rss, hwm float64, err error) {
	st, err := procStatusMiB(pid)
	if err != nil {
		return 0, 0, err
	}
	return st["VmRSS"], st["VmHWM"], nil
}

// procStatusMiB reads the kB fields of /proc/<pid>/status, in MiB.
func procStatusMiB(pid int) (map[string]float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			out[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return out, nil
}

// deploymentMeta names a Deployment for a patch whose response is metadata
// only, as the controller's patches are.
func deploymentMeta(k client.ObjectKey) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	m.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return m
}
