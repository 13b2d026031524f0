// Package memcached benchmarks the Memcached controller on the local control
// plane (a kwok cluster: real apiserver, kube-controller-manager, scheduler;
// kwok nodes on which pods go Running). 500 Memcached objects (size 1) are
// created at once; it reports the time until all are Available, the
// controller's apiserver writes per object, and its writes during 60 s of
// idleness afterwards (target 0).
//
// The reconciler runs in-process with the manager binary's client settings
// (QPS 20, burst 30, 4 workers), so that every request it sends is counted
// exactly by a wrapped transport, by verb and resource.
package memcached

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	objects    = 500
	idleWindow = 60 * time.Second
)

// requestCounter counts the manager's mutating requests by "VERB resource".
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			c.mu.Lock()
			c.counts[req.Method+" "+resourceOf(req.URL.Path)]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// reset returns the counts so far and starts again from zero.
func (c *requestCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// resourceOf turns /apis/g/v/namespaces/ns/res/name[/sub] into res[/sub].
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := range parts {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return path
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describe(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

func BenchmarkMemcached500(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))

	kc, err := startWorkingCluster(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Stop()
	if _, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", testenv.RepoRoot()+"/config/crd/bases/cache.runbook.dev_memcacheds.yaml"); err != nil {
		b.Fatal(err)
	}
	if _, err := kc.Kubectl(ctx, "wait", "--for=condition=Established", "crd/memcacheds.cache.runbook.dev", "--timeout=60s"); err != nil {
		b.Fatal(err)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	cl, err := client.New(kc.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}

	// The manager, as cmd/main.go builds it (controller-runtime's default
	// client rate limit, 4 workers), with every request counted.
	counter := &requestCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(kc.Config)
	cfg.QPS, cfg.Burst = 20, 30
	cfg.Wrap(counter.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		b.Fatal(err)
	}
	r := &mccontroller.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("memcached-controller"),
		Clock: clock.RealClock{}, FieldManager: mccontroller.DefaultFieldManager, MaxConcurrentReconciles: 4}
	if err := r.SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() { stopMgr(); <-done }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
	if err := cl.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	// On an overloaded machine kube-controller-manager can give up at
	// start-up (apiserver not healthy in time) and nothing restarts it:
	// prove the cluster runs Deployments before measuring anything.
	if err := warmUp(ctx, cl); err != nil {
		b.Fatal(err)
	}
	counter.reset()

	for b.Loop() {
		start := time.Now()
		// Created at once: 25 parallel creators.
		var wg sync.WaitGroup
		errs := make(chan error, objects)
		for w := range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < objects; i += 25 {
					mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("mc-%03d", i)},
						Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
					if err := cl.Create(ctx, mc); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		created := time.Since(start)

		var available, lastAvailable int
		lastProgress := time.Now()
		var deploymentsAt, runningAt time.Duration
		for {
			if deploymentsAt == 0 {
				var deps metav1.PartialObjectMetadataList
				deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
				if err := cl.List(ctx, &deps, client.InNamespace("bench")); err != nil {
					b.Fatal(err)
				}
				if len(deps.Items) == objects {
					deploymentsAt = time.Since(start)
				}
			}
			if runningAt == 0 {
				var pods corev1.PodList
				if err := cl.List(ctx, &pods, client.InNamespace("bench"),
					client.MatchingLabels{"app.kubernetes.io/name": "memcached"}, client.MatchingFields{"status.phase": "Running"}); err != nil {
					b.Fatal(err)
				}
				if len(pods.Items) == objects {
					runningAt = time.Since(start)
				}
			}
			var list cachev1alpha1.MemcachedList
			if err := cl.List(ctx, &list, client.InNamespace("bench")); err != nil {
				b.Fatal(err)
			}
			available = 0
			for i := range list.Items {
				if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, cachev1alpha1.ConditionAvailable) &&
					len(list.Items[i].Status.Servers) == 1 {
					available++
				}
			}
			if available == objects {
				break
			}
			if available != lastAvailable {
				lastAvailable, lastProgress = available, time.Now()
			}
			if ctx.Err() != nil || time.Since(lastProgress) > 5*time.Minute {
				b.Fatalf("only %d/%d Available after %s, no progress for %s (Deployments complete after %s, pods Running after %s; 0 means not yet)",
					available, objects, time.Since(start).Round(time.Second), time.Since(lastProgress).Round(time.Second), deploymentsAt, runningAt)
			}
			time.Sleep(time.Second)
		}
		toAvailable := time.Since(start)
		// Let the last status writes land (servers and conditions can come
		// from separate events), then count the idle window on its own.
		settle := 10 * time.Second
		time.Sleep(settle)
		rollout := counter.reset()
		time.Sleep(idleWindow)
		idle := counter.reset()

		b.ReportMetric(toAvailable.Seconds(), "s-to-all-available")
		b.ReportMetric(float64(total(rollout))/objects, "writes/object")
		b.ReportMetric(float64(total(idle)), "idle-writes")
		b.Logf("%d Memcached (size 1): created in %s; all %d Deployments exist after %s, all pods Running after %s; all Available with 1 server each after %s",
			objects, created.Round(time.Millisecond), objects, deploymentsAt.Round(time.Second), runningAt.Round(time.Second), toAvailable.Round(time.Millisecond))
		b.Logf("controller writes until settled (+%s): %d = %.2f/object: %s", settle, total(rollout), float64(total(rollout))/objects, describe(rollout))
		b.Logf("controller writes in %s of idleness: %d %s", idleWindow, total(idle), describe(idle))
		if total(idle) != 0 {
			b.Errorf("%d writes while idle, want 0", total(idle))
		}
	}
}

// warmUp runs one Deployment to a Running pod: the cluster's
// kube-controller-manager, scheduler and kwok all work.
func warmUp(ctx context.Context, cl client.Client) error {
	labels := map[string]string{"app": "warmup"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "warmup"},
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
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace("bench"), client.MatchingLabels(labels)); err != nil {
			return err
		}
		if len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning {
			return cl.Delete(ctx, d)
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("a plain Deployment got no Running pod in 3m: is kube-controller-manager of the kwok cluster running?")
}

// startWorkingCluster starts the kwok cluster (6 nodes, room for 660 pods)
// and checks that its kube-controller-manager runs (it creates the "default"
// ServiceAccount); on an overloaded machine it can exit at start-up and
// nothing restarts it. One more cluster is tried before giving up.
func startWorkingCluster(ctx context.Context) (*cluster.Cluster, error) {
	var lastErr error
	for attempt := 1; attempt <= 2; attempt++ {
		c, err := cluster.Start(ctx, cluster.Options{Nodes: 6, NamePrefix: "mcbench"})
		if err != nil {
			return nil, err
		}
		_, err = c.Kubectl(ctx, "wait", "--for=create", "serviceaccount/default", "-n", "default", "--timeout=120s")
		if err == nil {
			return c, nil
		}
		lastErr = fmt.Errorf("attempt %d: kube-controller-manager of cluster %s is not working: %w", attempt, c.Name, err)
		fmt.Fprintln(os.Stderr, lastErr)
		c.Stop()
	}
	return nil, lastErr
}
