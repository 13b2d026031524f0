// Package reloadercompat runs the RebootPolicy controller with the Reloader
// compatibility mode in-process against envtest (a real kube-apiserver and
// etcd, no workload controllers): Reloader's documented annotation
// examples, and the hostile inputs of the mode.
package reloadercompat

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
	"github.com/runbook-dev/runbook/internal/probe"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	operatorNamespace = "runbook-system"
	// maxCompat is --reloader-compat-max-per-namespace of the suite.
	maxCompat = 3
	timeout   = 90 * time.Second
	interval  = 100 * time.Millisecond
)

var (
	k8s             client.Client
	workers         *probe.Workers
	metricsRegistry = prometheus.NewRegistry()
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "an apiserver (envtest)", run)
}

func run(m *testing.M) int {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	opts := testenv.Options{Scheme: scheme, CRDs: []string{"autoreboot.runbook.dev_rebootpolicies.yaml"}, Namespaces: []string{operatorNamespace}}
	return testenv.RunWithManager(m, opts, func(e *testenv.Env) (manager.Manager, error) {
		k8s = e.Client
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
		mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
			Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		})
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		r, err := rbpcontroller.Setup(mgr, rbpcontroller.Options{
			Probes: probe.Settings{OperatorNamespace: operatorNamespace},
			Limits: rbpcontroller.Limits{MinPeriod: time.Second},
			Clock:  clock.RealClock{},
		})
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		workers = r.Workers
		metrics := reloadercompat.NewMetrics()
		if err := metrics.Register(metricsRegistry); err != nil {
			return nil, err
		}
		if err := reloadercompat.Setup(mgr, reloadercompat.Options{MaxPerNamespace: maxCompat, Metrics: metrics}); err != nil {
			return nil, fmt.Errorf("compat setup: %w", err)
		}
		return mgr, nil
	})
}

func createNamespace(t *testing.T, prefix string) string {
	return testenv.CreateNamespace(t, k8s, prefix)
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

func newWorkload(kind autorebootv1alpha1.TargetKind, ns, name string) client.Object {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch kind {
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: sel, Template: podTemplate()}}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: podTemplate()}}
	default:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: sel, Template: podTemplate()}}
	}
}

func templateOf(obj client.Object) *corev1.PodTemplateSpec {
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	default:
		return &obj.(*appsv1.Deployment).Spec.Template
	}
}

// markRolledOut plays the workload's controller (envtest runs none).
func markRolledOut(t *testing.T, obj client.Object) {
	testenv.MarkRolledOut(t, k8s, obj)
}

// stamp is the workload's restart stamp ("" until restarted).
func stamp(t *testing.T, kind autorebootv1alpha1.TargetKind, ns, name string) string {
	t.Helper()
	w := newWorkload(kind, ns, name)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(w), w); err != nil {
		t.Fatal(err)
	}
	return templateOf(w).Annotations[autorebootv1alpha1.RestartedAtAnnotation]
}

// observed is how many observations the compat policy's worker published.
func observed(ns, policy string) uint64 {
	return workers.Snapshot(types.NamespacedName{Namespace: ns, Name: policy})[reloadercompat.PolicyName].Observed
}

func eventNotes(ns, name, reason string) []string {
	return testenv.EventNotes(k8s, ns, name, reason)
}
