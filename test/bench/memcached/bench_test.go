// Package memcached benchmarks the Memcached controller as it ships: the
// real manager binary (--controllers=memcached, every other flag at its
// default: --kube-api-qps=50, --kube-api-burst=100, 4 workers),
// authenticated as config/rbac's ServiceAccount, on the local kwok cluster
// (real apiserver, kube-controller-manager and scheduler; kwok nodes on
// which pods go Running). 500 Memcached objects (size 1) are created at
// once; it measures the time until all are Available with their server
// listed, the manager's apiserver requests by verb and resource, per
// object, and its writes during 60 s of idleness afterwards.
//
// The manager's requests are read from the apiserver's audit log, which
// logs every request of the manager's ServiceAccount and nothing else: the
// count is the apiserver's, not an estimate from the outside.
//
// BENCH_SCALE=0.1 (or BENCH_MEMCACHED_OBJECTS=n, BENCH_IDLE=30s) runs a
// smaller smoke test.
package memcached

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/bench/internal/benchkit"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	fullObjects = 500
	fullIdle    = 60 * time.Second
	namespace   = "bench"
	creators    = 25

	// maxWritesPerObject is what the controller's design allows a size-1
	// Memcached from its creation until it is Available with its server
	// listed:
	//   - 1 server-side apply of the Service and 1 of the Deployment: each
	//     is applied when created and never again while its owned fields
	//     hold the spec (applyIfChanged); at size 1 there is no PDB;
	//   - 1 Created event for the objects created in that reconcile;
	//   - at most 4 status patches, one per distinct status (the status
	//     is written only when it changed): the Deployment applied with no
	//     replica yet (Progressing/ScalingUp), its replica existing but not
	//     available (WaitingForReadiness), Available, and the ready
	//     endpoint appearing in status.servers — the last two may also
	//     come together or in the other order, never as more writes.
	// A write the apiserver refuses (a 409 that the status writer then
	// recomputes) counts too: it is a request the apiserver served.
	maxWritesPerObject = 7
)

func BenchmarkMemcached500(b *testing.B) {
	for range b.N {
		run(b)
	}
}

func run(b *testing.B) {
	objects := benchkit.Size(b, "memcached_objects", fullObjects)
	idle := benchkit.Window(b, "idle", fullIdle, 10*time.Second)
	sum := benchkit.NewSummary("memcached")
	defer sum.Finish(b)

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())

	// kube-controller-manager, scheduler and kwok run 500 pods on 6 nodes
	// (kwok's 110 pods each).
	kc, err := cluster.Start(ctx, cluster.Options{Nodes: 6, NamePrefix: "mcbench", AuditPolicy: benchkit.AuditPolicy(benchkit.ManagerUser)})
	if err != nil {
		sum.Fatalf(b, "starting the cluster: %v", err)
	}
	defer kc.Stop()
	if _, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", testenv.RepoRoot()+"/config/crd/bases/cache.runbook.dev_memcacheds.yaml"); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if _, err := kc.Kubectl(ctx, "wait", "--for=condition=Established", "crd/memcacheds.cache.runbook.dev", "--timeout=60s"); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	cl, err := client.New(kc.Config, client.Options{Scheme: scheme})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	dir := b.TempDir()
	kubeconfig, err := benchkit.ManagerKubeconfig(ctx, kc, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	// Prove the cluster runs Deployments before measuring anything: on an
	// overloaded machine kube-controller-manager can fail in ways its
	// start-up check does not catch.
	if err := warmUp(ctx, kc, cl); err != nil {
		sum.Fatalf(b, "%v", err)
	}

	bin, err := cluster.BuildManager(ctx, dir)
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	mgr, err := cluster.StartManager(ctx, bin, kubeconfig, "--controllers=memcached")
	if err != nil {
		sum.Fatalf(b, "starting the manager: %v", err)
	}
	defer func() {
		_ = mgr.Stop()
		mgr.DumpLogsOnFailure(b.Failed())
	}()
	obs, err := benchkit.Observe(ctx, kc.Config, scheme, namespace, &cachev1alpha1.Memcached{}, &appsv1.Deployment{})
	if err != nil {
		sum.Fatalf(b, "%v", err)
	}
	defer obs.Stop()
	// Where the time goes: when kube-controller-manager reported each
	// Deployment available, and when the manager's status followed.
	depAvailable, mcAvailable := benchkit.NewFirstSeen(), benchkit.NewFirstSeen()
	if err := obs.OnUpdate(ctx, &appsv1.Deployment{}, func(_, n any) {
		if d, ok := n.(*appsv1.Deployment); ok && d.Status.AvailableReplicas >= 1 {
			depAvailable.Mark(d.Name)
		}
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}
	if err := obs.OnUpdate(ctx, &cachev1alpha1.Memcached{}, func(_, n any) {
		if mc, ok := n.(*cachev1alpha1.Memcached); ok && meta.IsStatusConditionTrue(mc.Status.Conditions, cachev1alpha1.ConditionAvailable) {
			mcAvailable.Mark(mc.Name)
		}
	}); err != nil {
		sum.Fatalf(b, "%v", err)
	}

	// Created at once: 25 parallel creators.
	start := time.Now()
	if err := createAll(ctx, cl, objects); err != nil {
		sum.Fatalf(b, "creating the Memcached objects: %v", err)
	}
	created := time.Since(start)
	sum.Figure("%d Memcached (size 1) created in %s by %d parallel clients", objects, created.Round(time.Millisecond), creators)

	progress, err := obs.Until(ctx, 5*time.Minute, 30*time.Minute, func() (bool, string, error) {
		var list cachev1alpha1.MemcachedList
		if err := obs.Reader().List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return false, "", err
		}
		n := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, cachev1alpha1.ConditionAvailable) && len(list.Items[i].Status.Servers) == 1 {
				n++
			}
		}
		return n == objects, fmt.Sprintf("%d/%d Available with 1 server", n, objects), nil
	})
	toAvailable := time.Since(start)
	allAvailable := time.Now()
	if err != nil {
		sum.Target(false, "all %d Available: %s after %s (%s)", objects, progress, toAvailable.Round(time.Second), clusterProgress(ctx, cl))
		sum.Fatalf(b, "waiting for the Memcached objects: %v", err)
	}
	sum.Target(true, "all %d Available with 1 server after %s", objects, toAvailable.Round(time.Millisecond))
	if last, n := depAvailable.Last(); n > 0 {
		lags := mcAvailable.Lags(depAvailable)
		sum.Figure("kube-controller-manager reported the last of %d Deployments available after %s; a Memcached's Available condition followed its Deployment's by p50 %s, p99 %s, max %s",
			n, last.Sub(start).Round(time.Millisecond), benchkit.Percentile(lags, 0.5).Round(time.Millisecond),
			benchkit.Percentile(lags, 0.99).Round(time.Millisecond), benchkit.Percentile(lags, 1).Round(time.Millisecond))
	}

	// Measuring idleness is the point of this wait: nothing changes, the
	// manager must write nothing.
	select {
	case <-time.After(idle):
	case <-mgr.Exited():
		sum.Fatalf(b, "the manager exited during the idle window")
	case <-ctx.Done():
		sum.Fatalf(b, "%v", ctx.Err())
	}
	idleEnd := time.Now()

	evs, err := benchkit.ReadAudit(kc.AuditLog(), benchkit.ManagerUser)
	if err != nil {
		sum.Fatalf(b, "reading the audit log: %v", err)
	}
	rollout := benchkit.Between(evs, start, allAvailable)
	idleEvs := benchkit.Writes(benchkit.Between(evs, allAvailable, idleEnd))
	writes := benchkit.Writes(rollout)
	perObject, unattributed := writesPerObject(writes, objects)
	lo, hi, mean := stats(perObject)
	writeRate := float64(len(writes)) / toAvailable.Seconds()

	sum.Target(hi <= maxWritesPerObject, "manager writes per Memcached until Available min/mean/max %d/%.2f/%d (bound ≤ %d)", lo, mean, hi, maxWritesPerObject)
	sum.Figure("manager writes %d (%.1f/s): %s", len(writes), writeRate, benchkit.Describe(benchkit.CountBy(writes, (*benchkit.AuditEvent).Key)))
	if len(unattributed) > 0 {
		sum.Target(false, "manager writes to no benchmark object: %s", benchkit.Describe(benchkit.CountBy(unattributed, (*benchkit.AuditEvent).Key)))
	}
	sum.Figure("refused writes: %s", benchkit.Describe(benchkit.Failed(writes)))
	if last := lastWrite(writes, "patch deployments"); !last.IsZero() {
		sum.Figure("last Deployment applied after %s", last.Sub(start).Round(time.Millisecond))
	}
	// Watches are logged when they end (after this run): what shows are
	// the lists of the caches' start and any reads the reconciles make.
	sum.Figure("manager reads since its start: %s", benchkit.Describe(benchkit.CountBy(reads(benchkit.Between(evs, time.Time{}, idleEnd)), (*benchkit.AuditEvent).Key)))
	sum.Target(len(idleEvs) == 0, "manager writes during %s of idleness: %d (%s; target 0)", idle, len(idleEvs), benchkit.Describe(benchkit.CountBy(idleEvs, (*benchkit.AuditEvent).Key)))

	b.ReportMetric(toAvailable.Seconds(), "s-to-all-available")
	b.ReportMetric(mean, "writes/object")
	b.ReportMetric(float64(hi), "max-writes/object")
	b.ReportMetric(float64(len(idleEvs)), "idle-writes")
	sum.Finish(b)
}

// createAll creates objects Memcached of size 1 with `creators` clients in
// parallel.
func createAll(ctx context.Context, cl client.Client, objects int) error {
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for w := range creators {
		wg.Go(func() {
			for i := w; i < objects; i += creators {
				mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: objectName(i)},
					Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
				if err := cl.Create(ctx, mc); err != nil {
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

func objectName(i int) string { return fmt.Sprintf("mc-%03d", i) }

// writesPerObject attributes each write to the Memcached it is for: the
// Memcached itself and its status, its Deployment, Service and PDB (named
// like it), and its events (named <object>.<suffix>). It returns the count
// of every Memcached and the writes that belong to none.
func writesPerObject(writes []benchkit.AuditEvent, objects int) (map[string]int, []benchkit.AuditEvent) {
	per := make(map[string]int, objects)
	for i := range objects {
		per[objectName(i)] = 0
	}
	var none []benchkit.AuditEvent
	for _, e := range writes {
		name := e.Name()
		if e.ObjectRef != nil && e.ObjectRef.Resource == "events" {
			name, _, _ = strings.Cut(name, ".")
		}
		if _, ok := per[name]; !ok || e.Namespace() != namespace {
			none = append(none, e)
			continue
		}
		per[name]++
	}
	return per, none
}

func stats(per map[string]int) (lo, hi int, mean float64) {
	vals := make([]int, 0, len(per))
	for _, v := range per {
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		return 0, 0, 0
	}
	sort.Ints(vals)
	total := 0
	for _, v := range vals {
		total += v
	}
	return vals[0], vals[len(vals)-1], float64(total) / float64(len(vals))
}

func reads(evs []benchkit.AuditEvent) []benchkit.AuditEvent {
	var out []benchkit.AuditEvent
	for _, e := range evs {
		if !e.IsWrite() {
			out = append(out, e)
		}
	}
	return out
}

func lastWrite(writes []benchkit.AuditEvent, key string) time.Time {
	var last time.Time
	for i := range writes {
		if writes[i].Key() == key && writes[i].RequestReceived.After(last) {
			last = writes[i].RequestReceived.Time
		}
	}
	return last
}

// clusterProgress says, for a run that did not finish, how far the
// cluster got (one list each, only on failure).
func clusterProgress(ctx context.Context, cl client.Client) string {
	var deps appsv1.DeploymentList
	var pods corev1.PodList
	if err := cl.List(ctx, &deps, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	if err := cl.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": "memcached"}); err != nil {
		return err.Error()
	}
	available, running, ready := 0, 0, 0
	for i := range deps.Items {
		if deps.Items[i].Status.AvailableReplicas > 0 {
			available++
		}
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			running++
		}
		for _, c := range pods.Items[i].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return fmt.Sprintf("%d Deployments (%d available), %d pods (%d Running, %d Ready)", len(deps.Items), available, len(pods.Items), running, ready)
}

// warmUp runs one Deployment to an available pod: the cluster's
// kube-controller-manager, scheduler and kwok all work.
func warmUp(ctx context.Context, kc *cluster.Cluster, cl client.Client) error {
	labels := map[string]string{"app": "warmup"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "warmup"},
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
	if _, err := kc.Kubectl(ctx, "wait", "--for=condition=Available", "deployment/warmup", "-n", namespace, "--timeout=180s"); err != nil {
		return fmt.Errorf("a plain Deployment got no available pod in 3m: is kube-controller-manager of the kwok cluster running? %w", err)
	}
	return cl.Delete(ctx, d)
}
