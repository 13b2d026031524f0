// Package nsscaler benchmarks the NSScaler controller on the local control
// plane (envtest: a real kube-apiserver and etcd): 500 namespaces × 10
// Deployments, parked and restored by the real manager binary, against the raw
// limit of a bare client patching the same objects at the same concurrency.
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	namespaces   = 500
	perNamespace = 10
	workloads    = namespaces * perNamespace
	// concurrency is the manager's default --nsscaler-write-concurrency,
	// used for the raw baseline too.
	concurrency = 16
	idle        = 60 * time.Second
)

func BenchmarkParkRestore500x10(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runOnce(b)
	}
}

func runOnce(b *testing.B) {
	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS = -1 // no client-side rate limit: the raw limit is the apiserver's
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)

	// Objects.
	start := time.Now()
	keys := make([]client.ObjectKey, 0, workloads)
	for n := 0; n < namespaces; n++ {
		ns := fmt.Sprintf("bench-%03d", n)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		for d := 0; d < perNamespace; d++ {
			keys = append(keys, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("d%02d", d)})
		}
	}
	if err := parallel(keys, func(k client.ObjectKey) error {
		return c.Create(ctx, deployment(k, replicasFor(k)))
	}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d namespaces and %d Deployments in %s", namespaces, workloads, time.Since(start).Round(time.Millisecond))

	// Raw limit: a bare client, same concurrency, the same one-patch-per-object
	// writes the controller makes (annotation + replicas, metadata-only
	// response), park then restore.
	rawPark := timed(func() error {
		return parallel(keys, func(k client.ObjectKey) error {
			body := fmt.Sprintf(`{"metadata":{"annotations":{"scaling.runbook.dev/original":"{\"v\":1,\"replicas\":%d,\"by\":\"raw\"}"}},"spec":{"replicas":0}}`, replicasFor(k))
			return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
		})
	}, b)
	rawRestore := timed(func() error {
		return parallel(keys, func(k client.ObjectKey) error {
			body := fmt.Sprintf(`{"metadata":{"annotations":{"scaling.runbook.dev/original":null}},"spec":{"replicas":%d}}`, replicasFor(k))
			return c.Patch(ctx, deploymentMeta(k), client.RawPatch(types.MergePatchType, []byte(body)))
		})
	}, b)
	b.Logf("raw limit: park %s, restore %s (%d patches each, %d in flight)", rawPark, rawRestore, workloads, concurrency)

	// The real manager binary.
	dir := b.TempDir()
	user, err := env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		b.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	// NSSCALER_BENCH_GOMEMLIMIT runs the manager with a Go memory limit, as
	// a container whose GOMEMLIMIT follows its memory limit would. Set after
	// the control plane started, so only the manager inherits it.
	if limit := os.Getenv("NSSCALER_BENCH_GOMEMLIMIT"); limit != "" {
		b.Setenv("GOMEMLIMIT", limit)
		b.Logf("manager runs with GOMEMLIMIT=%s", limit)
	}
	bin, err := cluster.BuildManager(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler", "--operator-namespace=runbook-system",
		fmt.Sprintf("--nsscaler-write-concurrency=%d", concurrency))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = mgr.Stop()
		mgr.DumpLogsOnFailure(b.Failed())
	}()

	startRSS, syncHWM := memory(b, mgr.Pid())
	b.Logf("manager ready (caches synced with %d Deployments): RSS %.1f MiB (peak so far %.1f MiB)", workloads, startRSS, syncHWM)
	sampler := sampleMemory(mgr.Pid())

	before := patches(ctx, b, cs)
	start = time.Now()
	if err := c.Create(ctx, &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec:       scalingv1alpha1.NSScalerSpec{NamespacePrefix: "bench-"},
	}); err != nil {
		b.Fatal(err)
	}
	// Completion is read from the NSScaler's status (a small object), so the
	// measurement does not load the apiserver with lists of 5,000 objects.
	waitFor(b, 10*time.Minute, func() bool {
		var s scalingv1alpha1.NSScaler
		return c.Get(ctx, client.ObjectKey{Name: "bench"}, &s) == nil && s.Status.ParkedWorkloads == workloads && s.Status.Done
	})
	park := time.Since(start)
	sampler.phase("idle")
	if !allReplicas(ctx, b, c, keys, true) {
		b.Fatal("status reports every Deployment parked, but some are not")
	}
	afterPark := patches(ctx, b, cs)
	parkWrites := float64(afterPark.deployments-before.deployments) / workloads

	idleBefore := patches(ctx, b, cs)
	time.Sleep(idle) // measuring idleness is the point: nothing may be written meanwhile
	idleAfter := patches(ctx, b, cs)
	idleWrites := idleAfter.mutating - idleBefore.mutating
	if idleWrites > 0 {
		b.Logf("writes while idle: %v", idleAfter.since(idleBefore))
	}

	sampler.phase("restore")
	start = time.Now()
	if err := c.Delete(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		b.Fatal(err)
	}
	// The finalizer is released only once every Deployment is restored.
	waitFor(b, 10*time.Minute, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "bench"}, &scalingv1alpha1.NSScaler{}))
	})
	restore := time.Since(start)
	if !allReplicas(ctx, b, c, keys, false) {
		b.Fatal("the NSScaler is gone, but some Deployments are not restored")
	}
	afterRestore := patches(ctx, b, cs)
	restoreWrites := float64(afterRestore.deployments-idleAfter.deployments) / workloads
	rss, hwm := memory(b, mgr.Pid())
	b.Logf("largest RSS seen per phase (anon + file-backed pages of the binary): %s", sampler.stop())

	b.ReportMetric(park.Seconds(), "park-s")
	b.ReportMetric(restore.Seconds(), "restore-s")
	b.ReportMetric(rawPark.Seconds(), "raw-park-s")
	b.ReportMetric(rawRestore.Seconds(), "raw-restore-s")
	b.ReportMetric(park.Seconds()/rawPark.Seconds(), "park/raw")
	b.ReportMetric(restore.Seconds()/rawRestore.Seconds(), "restore/raw")
	b.ReportMetric(parkWrites, "park-writes/workload")
	b.ReportMetric(restoreWrites, "restore-writes/workload")
	b.ReportMetric(float64(idleWrites), "idle-writes/60s")
	b.ReportMetric(startRSS, "start-rss-MiB")
	b.ReportMetric(rss, "rss-MiB")
	b.ReportMetric(hwm, "peak-rss-MiB")
	b.Logf("park %s (raw %s, ×%.2f), restore %s (raw %s, ×%.2f), writes/workload park %.3f restore %.3f, idle writes in %s: %d, RSS %.1f MiB (peak %.1f MiB)",
		park.Round(time.Millisecond), rawPark.Round(time.Millisecond), park.Seconds()/rawPark.Seconds(),
		restore.Round(time.Millisecond), rawRestore.Round(time.Millisecond), restore.Seconds()/rawRestore.Seconds(),
		parkWrites, restoreWrites, idle, idleWrites, rss, hwm)
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
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := f(k); err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func timed(f func() error, b *testing.B) time.Duration {
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func waitFor(b *testing.B, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("condition not met within %s", limit)
		}
		time.Sleep(100 * time.Millisecond) // polling the apiserver; no event to wait on here
	}
}

// allReplicas reports whether every Deployment is parked (0 replicas with the
// annotation) or restored (its original count, no annotation).
func allReplicas(ctx context.Context, b *testing.B, c client.Client, keys []client.ObjectKey, parked bool) bool {
	var l appsv1.DeploymentList
	if err := c.List(ctx, &l); err != nil {
		b.Fatal(err)
	}
	want := map[client.ObjectKey]int32{}
	for _, k := range keys {
		want[k] = replicasFor(k)
	}
	n := 0
	for _, d := range l.Items {
		k := client.ObjectKeyFromObject(&d)
		orig, ok := want[k]
		if !ok {
			continue
		}
		_, annotated := d.Annotations["scaling.runbook.dev/original"]
		if parked && *d.Spec.Replicas == 0 && annotated || !parked && *d.Spec.Replicas == orig && !annotated {
			n++
		}
	}
	return n == len(keys)
}

type requestCounts struct {
	deployments int64 // PATCH requests on deployments
	mutating    int64 // every mutating request except leases
	// byResource splits mutating by "VERB resource".
	byResource map[string]int64
}

// since is what was written between before and rc, by verb and resource.
func (rc requestCounts) since(before requestCounts) map[string]int64 {
	d := map[string]int64{}
	for k, v := range rc.byResource {
		if n := v - before.byResource[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// patches reads the apiserver's request counters.
func patches(ctx context.Context, b *testing.B, cs kubernetes.Interface) requestCounts {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rc := requestCounts{byResource: map[string]int64{}}
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
		mutating := false
		for _, verb := range []string{`verb="PATCH"`, `verb="POST"`, `verb="PUT"`, `verb="DELETE"`, `verb="APPLY"`} {
			if strings.Contains(line, verb) {
				mutating = true
			}
		}
		if !mutating || strings.Contains(line, `resource="leases"`) || strings.Contains(line, `resource="subjectaccessreviews"`) ||
			strings.Contains(line, `resource="tokenreviews"`) {
			continue
		}
		rc.mutating += int64(v)
		rc.byResource[label(line, "verb")+" "+label(line, "resource")] += int64(v)
		if strings.Contains(line, `verb="PATCH"`) && strings.Contains(line, `resource="deployments"`) {
			rc.deployments += int64(v)
		}
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
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
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
	}()
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
		parts = append(parts, fmt.Sprintf("%s %.1f MiB (anon %.1f, file %.1f)", p, v[0], v[1], v[2]))
	}
	return strings.Join(parts, "; ")
}

// memory returns the manager's resident and peak resident set in MiB.
func memory(b *testing.B, pid int) (rss, hwm float64) {
	st, err := procStatusMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	return st["VmRSS"], st["VmHWM"]
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
