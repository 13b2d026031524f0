// Package nsscaler holds the NSScaler controller's integration tests: a real
// kube-apiserver and etcd (envtest), the reconciler in-process in a
// controller-runtime manager started per test.
package nsscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	timeout = 60 * time.Second
	poll    = 100 * time.Millisecond
)

var (
	env    *testenv.Env
	k8s    client.Client
	scheme = runtime.NewScheme()
)

var widgetGVK = schema.GroupVersionKind{Group: "test.runbook.dev", Version: "v1", Kind: "Widget"}

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "envtest (kube-apiserver and etcd in bin/k8s: make k8s-binaries)", run)
}

func run(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	logs := io.Discard
	if os.Getenv("NSSCALER_TEST_VERBOSE") != "" {
		logs = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.Level(zapcore.DebugLevel)))
	e, err := testenv.Start(testenv.Options{
		Scheme: scheme,
		// Memcached is a custom kind with a scale subresource to park;
		// testdata holds the Widget, another one.
		// KEDA's ScaledObject is generated from KEDA's API module
		// (make keda-crd).
		CRDs: []string{"scaling.runbook.dev_nsscalers.yaml", "scaling.runbook.dev_wakerequests.yaml", "cache.runbook.dev_memcacheds.yaml"},
		// Flux's and Argo CD's are generated from (or, for Argo CD, published
		// in) their modules too (make gitops-crds).
		ExtraCRDPaths: []string{"testdata", filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "keda.sh_scaledobjects.yaml"),
			filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
			filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "helm.toolkit.fluxcd.io_helmreleases.yaml"),
			filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "argoproj.io_applications.yaml")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = e.Stop() }()
	env, k8s = e, e.Client
	return m.Run()
}

// prefix is a random namespace prefix for one test, e.g. "pa-3f9c01-": the
// namespaces a test selects by it were created by that test alone, in
// this run (-count=N) alone.
func prefix(base string) string { return testenv.RandomName(base) + "-" }

// managerOptions shape one in-process manager.
type managerOptions struct {
	// operatorNamespace is never parked (--operator-namespace).
	operatorNamespace string
	writeConcurrency  int
	// writeQPS caps the workload writes per second (--nsscaler-write-qps).
	writeQPS float64
	// clock is the reconciler's clock (nil: the real one).
	clock clock.WithDelayedExecution
	// protected are globs of namespaces never parked.
	protected []string
	fights    nsscontroller.FightPolicy
	// config is whom the manager runs as (nil: the suite's admin).
	config *rest.Config
	// requests, when set, records every request the manager sends.
	requests *requestLog
	// argoCDNamespace is Argo CD's own namespace (--nsscaler-argocd-namespace).
	argoCDNamespace string
}

// requestLog records the requests a manager sends ("VERB path").
type requestLog struct {
	mu   sync.Mutex
	sent []string
}

type loggingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (t loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.log.mu.Lock()
	t.log.sent = append(t.log.sent, req.Method+" "+req.URL.Path)
	t.log.mu.Unlock()
	return t.next.RoundTrip(req)
}

// writes lists the recorded writes (anything but GET, LIST, WATCH) whose
// path contains every one of parts.
func (l *requestLog) writes(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.sent {
		if strings.HasPrefix(r, http.MethodGet+" ") {
			continue
		}
		match := true
		for _, p := range parts {
			match = match && strings.Contains(r, p)
		}
		if match {
			out = append(out, r)
		}
	}
	return out
}

// runningManager is an in-process manager running the nsscaler controller.
type runningManager struct {
	metrics *nsscontroller.Metrics
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
}

// stop cancels the manager and waits for it; safe to call twice.
func (m *runningManager) stop(t *testing.T) {
	t.Helper()
	m.once.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				t.Errorf("manager stopped with %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("manager did not stop within a minute")
		}
	})
}

// startManager runs the controller in a manager of its own; it is stopped
// when the test ends (after the test's own cleanups registered later).
func startManager(t *testing.T, opts managerOptions) *runningManager {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	if opts.config != nil {
		cfg = rest.CopyConfig(opts.config)
	}
	if opts.requests != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{next: rt, log: opts.requests} })
	}
	var clk clock.WithDelayedExecution = clock.RealClock{}
	if opts.clock != nil {
		clk = opts.clock
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds a controller named nsscaler in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := nsscontroller.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nsscontroller.Setup(mgr, nsscontroller.Options{
		Clock:               clk,
		Metrics:             metrics,
		OperatorNamespace:   opts.operatorNamespace,
		ProtectedNamespaces: opts.protected,
		Fights:              opts.fights,
		WriteConcurrency:    opts.writeConcurrency,
		WriteQPS:            opts.writeQPS,
		ArgoCDNamespace:     opts.argoCDNamespace,
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &runningManager{metrics: metrics, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// oneNamespace is the world of most tests: a random prefix p for the
// NSScaler to select by, the namespace p+"a" (created) and the NSScaler's
// name, all from base.
func oneNamespace(t *testing.T, base string) (p, ns, name string) {
	t.Helper()
	p = prefix(base)
	ns, name = p+"a", testenv.RandomName(base)
	createNamespace(t, ns, nil)
	return p, ns, name
}

// createNamespace creates a namespace (its name made random by the caller,
// see prefix) and deletes it when the test ends, after the NSScalers
// created later in the test are gone.
func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}},
	}
}

func createDeployment(t *testing.T, ns, name string, replicas *int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func createStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func createCronJob(t *testing.T, ns, name string, suspend *bool) {
	t.Helper()
	c := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: "*/5 * * * *",
			Suspend:  suspend,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/job:1"}}},
			}}},
		},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func createWidget(t *testing.T, ns, name string, replicas *int64) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	spec := map[string]any{}
	if replicas != nil {
		spec["replicas"] = *replicas
	}
	u.Object["spec"] = spec
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// createScaler creates an NSScaler and, at the end of the test, deletes it
// and waits until its finalizer let it go (while the manager still runs).
func createScaler(t *testing.T, name string, spec scalingv1alpha1.NSScalerSpec) *scalingv1alpha1.NSScaler {
	t.Helper()
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteScalerAndWait(t, name) })
	return s
}

func deleteScalerAndWait(t *testing.T, name string) {
	t.Helper()
	g := NewWithT(t)
	s := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), s))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &scalingv1alpha1.NSScaler{}))
	}, timeout, poll).Should(BeTrue(), "NSScaler %s was not released", name)
}

func updateScaler(t *testing.T, name string, mutate func(*scalingv1alpha1.NSScalerSpec)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		var s scalingv1alpha1.NSScaler
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s); err != nil {
			return err
		}
		mutate(&s.Spec)
		return k8s.Update(context.Background(), &s)
	}, timeout, poll).Should(Succeed())
}

func getScaler(g Gomega, name string) scalingv1alpha1.NSScaler {
	var s scalingv1alpha1.NSScaler
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s)).To(Succeed())
	return s
}

// state is what the tests check on a workload: its replicas (or suspend) and
// its annotation.
type state struct {
	Replicas   int32
	Suspend    bool
	Annotation string
}

func deploymentState(g Gomega, ns, name string) state {
	var d appsv1.Deployment
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return state{Replicas: *d.Spec.Replicas, Annotation: d.Annotations[nsscontroller.AnnotationOriginal]}
}

func statefulSetState(g Gomega, ns, name string) state {
	var s appsv1.StatefulSet
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	return state{Replicas: *s.Spec.Replicas, Annotation: s.Annotations[nsscontroller.AnnotationOriginal]}
}

func cronJobState(g Gomega, ns, name string) state {
	var c batchv1.CronJob
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c)).To(Succeed())
	return state{Suspend: ptr.Deref(c.Spec.Suspend, false), Annotation: c.Annotations[nsscontroller.AnnotationOriginal]}
}

func widgetState(g Gomega, ns, name string) (state, bool) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	r, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	g.Expect(err).NotTo(HaveOccurred())
	return state{Replicas: int32(r), Annotation: u.GetAnnotations()[nsscontroller.AnnotationOriginal]}, found
}

func memcachedState(g Gomega, ns, name string) state {
	var m cachev1alpha1.Memcached
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &m)).To(Succeed())
	return state{Replicas: ptr.Deref(m.Spec.Size, -1), Annotation: m.Annotations[nsscontroller.AnnotationOriginal]}
}

func parkedBy(name string, replicas int32) string {
	return nsscontroller.ReplicasOriginal(replicas, name).Encode()
}

// scaleDeployment sets spec.replicas like `kubectl scale` would.
func scaleDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	if err := k8s.Patch(context.Background(), d, patch, client.FieldOwner("kubectl")); err != nil {
		t.Fatal(err)
	}
}

func widgetObject(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func patchAnnotation(t *testing.T, ns, name, value string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{nsscontroller.AnnotationOriginal: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, body)); err != nil {
		t.Fatal(err)
	}
}

// tryScaleToZero is a dry-run scale of a Deployment to zero, to see whether
// admission lets it through.
func tryScaleToZero(ns, name string) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return k8s.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)), client.DryRunAll)
}

// expectNamespaceEvents waits until the NSScaler has recorded an event of
// reason about each of namespaces (events.k8s.io/v1, the namespace as the
// related object), reported by the controller's documented name.
func expectNamespaceEvents(g Gomega, scaler, reason string, namespaces ...string) {
	g.Eventually(func(g Gomega) {
		var l eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &l)).To(Succeed())
		var related []string
		for _, e := range l.Items {
			if e.Regarding.Kind != "NSScaler" || e.Regarding.Name != scaler || e.Reason != reason {
				continue
			}
			g.Expect(e.ReportingController).To(Equal("nsscaler-controller"), "event %s", e.Name)
			if e.Related != nil {
				related = append(related, e.Related.Name)
			}
		}
		g.Expect(related).To(ContainElements(namespaces), "%s events of NSScaler %s", reason, scaler)
	}, timeout, poll).Should(Succeed())
}

// metricValue reads a gauge or counter.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	switch {
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	case d.Counter != nil:
		return d.Counter.GetValue()
	}
	return -1
}

// seriesCount counts the series a collector exports.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
