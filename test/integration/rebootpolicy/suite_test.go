// Package rebootpolicy runs the RebootPolicy controller in-process against
// envtest (a real kube-apiserver and etcd, no workload controllers): CRD
// validation, worker lifecycle, restart patches per kind and storm control.
package rebootpolicy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/autoreboot"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	env     *testenv.Env
	k8s     client.Client
	workers *autoreboot.Workers
)

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := autorebootv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	e, err := startEnvtest(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	env, k8s = e, e.Client
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		_ = e.Stop()
		os.Exit(1)
	}
	// No --exec-probe-dir: exec probes must be refused.
	workers, err = autoreboot.Setup(mgr, autoreboot.Options{Clock: clock.RealClock{}, Metrics: autoreboot.NewMetrics()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		_ = e.Stop()
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	<-done
	_ = e.Stop()
	os.Exit(code)
}

// startEnvtest is testenv.Start with only this package's CRD installed, so
// the suite does not depend on the other groups' CRDs.
func startEnvtest(scheme *runtime.Scheme) (*testenv.Env, error) {
	if err := testenv.RequireBinaries("kube-apiserver", "etcd"); err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "autoreboot.runbook.dev_rebootpolicies.yaml")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: testenv.BinDir(),
		Scheme:                scheme,
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &testenv.Env{Environment: e, Config: cfg, Client: c}, nil
}

func zapLevel() zapcore.Level {
	if os.Getenv("RBP_DEBUG") != "" {
		return -2
	}
	return 1
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + suffix()}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

var podTemplate = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
	Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
}

func newDeployment(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": "front"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: *podTemplate.DeepCopy(),
		},
	}
}

func newStatefulSet(ns, name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: *podTemplate.DeepCopy(),
		},
	}
}

func newDaemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: *podTemplate.DeepCopy(),
		},
	}
}

// markRolledOut writes the status a workload controller would write once
// the rollout is complete (envtest runs no workload controllers).
func markRolledOut(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		n := *o.Spec.Replicas
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: o.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	case *appsv1.StatefulSet:
		n := *o.Spec.Replicas
		o.Status = appsv1.StatefulSetStatus{ObservedGeneration: o.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n, CurrentRevision: "r1", UpdateRevision: "r1"}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{ObservedGeneration: o.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2, NumberReady: 2}
	}
	if err := k8s.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func getRBP(t *testing.T, ns, name string) *autorebootv1alpha1.RebootPolicy {
	t.Helper()
	var rbp autorebootv1alpha1.RebootPolicy
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &rbp); err != nil {
		t.Fatal(err)
	}
	return &rbp
}

func condition(rbp *autorebootv1alpha1.RebootPolicy, typ string) *metav1.Condition {
	for i := range rbp.Status.Conditions {
		if rbp.Status.Conditions[i].Type == typ {
			return &rbp.Status.Conditions[i]
		}
	}
	return nil
}

// eventReasons lists the reasons of events.k8s.io events in ns about name.
func eventReasons(ns, name string) []string {
	var l eventsv1.EventList
	if err := k8s.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func restartedAt(obj client.Object) string {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	case *appsv1.StatefulSet:
		return o.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	case *appsv1.DaemonSet:
		return o.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation]
	}
	return ""
}
