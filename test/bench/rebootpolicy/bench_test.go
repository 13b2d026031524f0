// Package rebootpolicy benchmarks the RebootPolicy controller on the local
// control plane (kwok cluster, real manager binary): 1,000 RebootPolicies,
// each with one httpGet probe at periodSeconds 1 against a local HTTP
// server. It reports probe schedule drift, change→patch latency, the
// manager's CPU and RSS, and apiserver writes while nothing changes.
package rebootpolicy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
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
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	policies     = 1000
	changed      = 50
	steadyWindow = 30 * time.Second
)

// probeServer answers /p/<i>; it records arrival times and fails paths on
// demand.
type probeServer struct {
	mu       sync.Mutex
	arrivals [policies][]time.Time
	failing  [policies]atomic.Bool
}

func (s *probeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	if err != nil || i < 0 || i >= policies {
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
				d := t.Sub(prev) - time.Second
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

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	i := int(float64(len(s)-1) * p)
	return s[i]
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, NamePrefix: "rbp-bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config/crd/bases/autoreboot.runbook.dev_rebootpolicies.yaml")); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "crd/rebootpolicies.autoreboot.runbook.dev", "--timeout=60s"); err != nil {
		b.Fatal(err)
	}
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = autorebootv1alpha1.AddToScheme(scheme)
	cfg := *c.Config
	cfg.QPS, cfg.Burst = 500, 1000
	k8s, err := client.NewWithWatch(&cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}

	srv := &probeServer{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()
	port := l.Addr().(*net.TCPAddr).Port

	dir := b.TempDir()
	bin, err := cluster.BuildManager(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	// The probe server is allowed by exact address, as an admin would; all
	// 1,000 policies live in one namespace, so its share is lifted.
	mgr, err := cluster.StartManager(ctx, bin, c.Kubeconfig, "--controllers=rebootpolicy", "--zap-log-level=info",
		fmt.Sprintf("--probe-allow=127.0.0.1:%d", port), "--probe-max-per-namespace=0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = mgr.Stop()
		// Kept for analysis: restarts and fires are logged at info level.
		_ = os.WriteFile(filepath.Join(os.TempDir(), "rbp-bench-manager.log"), []byte(mgr.Logs()), 0o644)
	}()

	ns := "bench"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	err = parallel(policies, 16, func(i int) error {
		name := fmt.Sprintf("w-%d", i)
		dep := &appsv1.Deployment{
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
		if err := k8s.Create(ctx, dep); err != nil {
			return err
		}
		return k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: autorebootv1alpha1.RebootPolicySpec{
				Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: name},
				// Storm control on, as in production: a dependency that
				// stays down restarts its target once, not once per rollout.
				MinRestartInterval: &metav1.Duration{Duration: 10 * time.Minute},
				Policies: []autorebootv1alpha1.Policy{{Name: "http", Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Host: "127.0.0.1", Port: intstr.FromInt(port), Path: fmt.Sprintf("/p/%d", i)}},
					PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1,
				}}}},
			},
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	// Settle: every policy has reported Success.
	settleStart := time.Now()
	for {
		var list autorebootv1alpha1.RebootPolicyList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready, reported := 0, 0
		for _, r := range list.Items {
			if len(r.Status.Policies) == 1 && r.Status.Policies[0].LastResult != "" {
				reported++
				if r.Status.Policies[0].LastResult == autorebootv1alpha1.ResultSuccess {
					ready++
				}
			}
		}
		// The Deployment controller must have observed every Deployment:
		// until then a target counts as rolling out and storm control
		// (rightly) defers its restart, which would measure the
		// kube-controller-manager's backlog instead of the operator.
		var deps appsv1.DeploymentList
		if err := k8s.List(ctx, &deps, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		observed := 0
		for _, d := range deps.Items {
			if d.Status.ObservedGeneration >= d.Generation {
				observed++
			}
		}
		// On a loaded machine some 1s probes time out (and restart their
		// target): settle once every policy reported and 90% are healthy;
		// the flapping shows up in the idle-writes figure.
		if reported == policies && ready >= policies*90/100 && observed == policies {
			b.Logf("settled: %d/%d healthy, %d/%d Deployments observed by their controller", ready, policies, observed, policies)
			break
		}
		if time.Since(settleStart) > 10*time.Minute {
			b.Fatalf("only %d/%d policies reported Success (%d reported)", ready, policies, reported)
		}
		time.Sleep(time.Second)
	}
	b.Logf("settled in %s", time.Since(settleStart).Round(time.Second))
	// Let the reconcile of the settle finish before measuring.
	time.Sleep(5 * time.Second)

	// Steady state: count writes to RebootPolicies and Deployments.
	var writes atomic.Int64
	var rbpWrites, depWrites atomic.Int64
	var sampleMu sync.Mutex
	var samples []string
	depWriters := map[string]int{}
	watchWrites := func(list client.ObjectList) watch.Interface {
		w, err := k8s.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Modified && ev.Type != watch.Added && ev.Type != watch.Deleted {
					continue
				}
				writes.Add(1)
				switch o := ev.Object.(type) {
				case *autorebootv1alpha1.RebootPolicy:
					rbpWrites.Add(1)
					sampleMu.Lock()
					if len(samples) < 8 && ev.Type == watch.Modified && len(o.Status.Policies) == 1 {
						ps := o.Status.Policies[0]
						samples = append(samples, fmt.Sprintf("%s: %s %q pending=%v restarts=%d", o.Name, ps.LastResult, ps.Message, ps.PendingTrigger, o.Status.RestartCount))
					}
					sampleMu.Unlock()
				case *appsv1.Deployment:
					depWrites.Add(1)
					var last metav1.ManagedFieldsEntry
					for _, mf := range o.ManagedFields {
						if mf.Time != nil && (last.Time == nil || !mf.Time.Before(last.Time)) {
							last = mf
						}
					}
					sampleMu.Lock()
					depWriters[last.Manager+"/"+last.Subresource]++
					sampleMu.Unlock()
				}
			}
		}()
		return w
	}
	ww1 := watchWrites(&autorebootv1alpha1.RebootPolicyList{})
	ww2 := watchWrites(&appsv1.DeploymentList{})
	// A watch without resourceVersion starts with synthetic ADDED events
	// for existing objects: wait for them, then reset the counter.
	time.Sleep(3 * time.Second)
	writes.Store(0)
	rbpWrites.Store(0)
	depWrites.Store(0)
	sampleMu.Lock()
	samples = nil
	depWriters = map[string]int{}
	sampleMu.Unlock()
	cpu0, _ := cpuSeconds(mgr.Pid())
	from := time.Now()
	time.Sleep(steadyWindow)
	to := time.Now()
	cpu1, _ := cpuSeconds(mgr.Pid())
	idleWrites := writes.Load()
	ww1.Stop()
	ww2.Stop()
	drift := srv.drifts(from, to)
	cores := (cpu1 - cpu0) / to.Sub(from).Seconds()
	rss := rssMiB(mgr.Pid())

	b.Logf("steady window: %d probes, drift p50=%s p99=%s, cpu=%.3f cores, rss=%.0f MiB, writes=%d (%d RebootPolicy, %d Deployment by %v); samples: %v",
		len(drift), percentile(drift, 0.5), percentile(drift, 0.99), cores, rss, idleWrites, rbpWrites.Load(), depWrites.Load(), depWriters, samples)

	// Change → patch: 50 endpoints start failing at once. A flipped
	// Deployment counts when its restartedAt annotation differs from the
	// value it had before the flip.
	var before appsv1.DeploymentList
	if err := k8s.List(ctx, &before, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	// Flip only endpoints whose Deployment was never restarted (a probe
	// that timed out on the loaded machine may have restarted some, which
	// are now in their cooldown).
	prev := map[string]string{}
	flipped := map[string]bool{}
	var flipIdx []int
	for _, d := range before.Items {
		if len(flipIdx) == changed {
			break
		}
		if _, restarted := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; restarted {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(d.Name, "w-"))
		if err != nil {
			continue
		}
		flipped[d.Name] = true
		flipIdx = append(flipIdx, i)
	}
	if len(flipIdx) < changed {
		b.Fatalf("only %d Deployments were never restarted", len(flipIdx))
	}
	dw, err := k8s.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: before.ResourceVersion}})
	if err != nil {
		b.Fatal(err)
	}
	patched := make(chan time.Duration, changed)
	flip := time.Now()
	seen := map[string]bool{}
	go func() {
		for ev := range dw.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || !flipped[d.Name] || seen[d.Name] {
				continue
			}
			if v := d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]; v != "" && v != prev[d.Name] {
				seen[d.Name] = true
				patched <- time.Since(flip)
			}
		}
	}()
	for _, i := range flipIdx {
		srv.failing[i].Store(true)
	}
	var lat []time.Duration
	deadline := time.After(2 * time.Minute)
	for len(lat) < changed {
		select {
		case d := <-patched:
			lat = append(lat, d)
		case <-deadline:
			b.Fatalf("only %d/%d changes were patched", len(lat), changed)
		}
	}
	dw.Stop()

	b.ReportMetric(float64(percentile(drift, 0.50).Microseconds())/1000, "drift-p50-ms")
	b.ReportMetric(float64(percentile(drift, 0.99).Microseconds())/1000, "drift-p99-ms")
	b.ReportMetric(float64(percentile(lat, 0.50).Milliseconds()), "change-patch-p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Milliseconds()), "change-patch-p99-ms")
	b.ReportMetric(cores, "cpu-cores")
	b.ReportMetric(rss, "rss-MiB")
	// Writes by the operator (RebootPolicy status, restart patches); the
	// Deployment status writes of kube-controller-manager are not ours.
	sampleMu.Lock()
	operatorWrites := rbpWrites.Load() + int64(depWriters["runbook-rebootpolicy/"])
	sampleMu.Unlock()
	b.ReportMetric(float64(operatorWrites)/steadyWindow.Seconds(), "operator-idle-writes/s")
	b.ReportMetric(float64(idleWrites)/steadyWindow.Seconds(), "all-idle-writes/s")
	b.Logf("policies=%d probes in window=%d drift p50=%s p99=%s; change→patch p50=%s p99=%s; cpu=%.3f cores rss=%.0f MiB; idle writes=%d in %s",
		policies, len(drift), percentile(drift, 0.5), percentile(drift, 0.99), percentile(lat, 0.5), percentile(lat, 0.99), cores, rss, idleWrites, steadyWindow)
}
