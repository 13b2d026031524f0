// Package rebootpolicy runs the RebootPolicy controller in-process against
// envtest (a real kube-apiserver and etcd, no workload controllers): CRD
// validation, worker lifecycle, restart patches per kind and storm control.
package rebootpolicy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/probe"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	env     *testenv.Env
	k8s     client.Client
	workers *probe.Workers
	// external is the one HTTP server probes may reach: the manager is told
	// to allow exactly its address, as an admin would allow a dependency.
	external *externalServer
	// managerLogs is everything the in-process manager logged, to prove
	// that no secret, DSN or file content reaches a log.
	managerLogs = &testenv.SyncBuffer{}
	// metricsRegistry holds the manager's metrics, read by tests to wait
	// for probes having run (instead of sleeping).
	metricsRegistry = prometheus.NewRegistry()
)

// externalManagerLabel marks RebootPolicies that a manager binary started
// by the test reconciles; the suite's manager ignores them.
const externalManagerLabel = "test.runbook.dev/manager"

// Manager settings of the suite, as an admin would set the flags.
const (
	operatorNamespace = "runbook-system"
	// maxPerNamespace is --probe-max-per-namespace; tests keep fewer
	// policies per namespace, except the one about the limit.
	maxPerNamespace = 6
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "an apiserver (envtest) and the machine's MariaDB and PostgreSQL", run)
}

func run(m *testing.M) int {
	var err error
	if external, err = startExternalServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer external.Close()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	opts := testenv.Options{Scheme: scheme, CRDs: []string{"autoreboot.runbook.dev_rebootpolicies.yaml"}, Namespaces: []string{operatorNamespace}}
	return testenv.RunWithManager(m, opts, func(e *testenv.Env) (manager.Manager, error) {
		env, k8s = e, e.Client
		// Everything down to V(1) is kept for the leak checks; RBP_DEBUG also
		// prints it.
		var logs io.Writer = managerLogs
		if os.Getenv("RBP_DEBUG") != "" {
			logs = io.MultiWriter(os.Stderr, managerLogs)
		}
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(-1)), zap.WriteTo(logs)))
		// RebootPolicies labelled for a manager binary of their own (the
		// tests that kill it) are not this manager's business.
		notExternal, err := labels.Parse("!" + externalManagerLabel)
		if err != nil {
			return nil, err
		}
		mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&autorebootv1alpha1.RebootPolicy{}: {Label: notExternal}}},
		})
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		allow, err := egress.ParseRules("127.0.0.1:3306,127.0.0.1:5432," + external.Listener.Addr().String())
		if err != nil {
			return nil, err
		}
		metrics := rbpcontroller.NewMetrics()
		if err := metrics.Register(metricsRegistry); err != nil {
			return nil, err
		}
		// No --exec-probe-dir: exec probes must be refused.
		r, err := rbpcontroller.Setup(mgr, rbpcontroller.Options{
			Probes:  probe.Settings{OperatorNamespace: operatorNamespace},
			Network: egress.Settings{Allow: allow},
			Limits:  rbpcontroller.Limits{MinPeriod: time.Second, MaxPerNamespace: maxPerNamespace},
			Clock:   clock.RealClock{},
			Metrics: metrics,
			// The Rollout CRD is installed mid-suite (TestArgoRollouts).
			RolloutKindRecheck: 2 * time.Second,
		})
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		workers = r.Workers
		return mgr, nil
	})
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func createNamespace(t *testing.T, prefix string) string {
	return testenv.CreateNamespace(t, k8s, prefix)
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

// markRolledOut plays the workload's controller (envtest runs none).
func markRolledOut(t *testing.T, obj client.Object) {
	testenv.MarkRolledOut(t, k8s, obj)
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
	return testenv.EventReasons(k8s, ns, name)
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
