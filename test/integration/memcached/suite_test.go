// Package memcached tests the Memcached controller against a real
// kube-apiserver and etcd (envtest). There is no kube-controller-manager:
// Deployments get no pods and no status unless a test writes it, which is
// how the status computation is driven with exact inputs.
package memcached

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	mccontroller "github.com/runbook-dev/runbook/internal/controller/memcached"
	"github.com/runbook-dev/runbook/test/testenv"
)

// suite is what TestMain started, shared read-only by the tests.
type suite struct {
	client client.Client
	// managerClient acts as the manager's identity (no cache).
	managerClient client.Client
	reconciler    *mccontroller.Reconciler
	writes        *writeCounter
	// watcher watches objects as the test's admin (not counted in writes).
	watcher client.WithWatch
	// managerConfig is the manager's identity without the write counter,
	// for a test that starts a manager of its own.
	managerConfig *rest.Config
	scheme        *runtime.Scheme
}

var env suite

// writeCounter counts the manager's mutating requests (create, update,
// patch, delete) per path, to prove that a reconcile of an unchanged object
// writes nothing, and which of them the apiserver accepted. Dry runs
// change nothing: they are kept apart.
type writeCounter struct {
	mu    sync.Mutex
	paths []string
	// accepted[i]: paths[i] was answered with a 2xx status.
	accepted []bool
	dryRuns  []string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions {
			return rt.RoundTrip(req)
		}
		w.mu.Lock()
		if req.URL.Query().Has("dryRun") {
			w.dryRuns = append(w.dryRuns, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
			return rt.RoundTrip(req)
		}
		i := len(w.paths)
		w.paths = append(w.paths, req.Method+" "+req.URL.Path)
		w.accepted = append(w.accepted, false)
		w.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
			w.mu.Lock()
			w.accepted[i] = true
			w.mu.Unlock()
		}
		return resp, err
	})
}

// acceptedSince returns the writes recorded after mark that the apiserver
// accepted (answered already).
func (w *writeCounter) acceptedSince(mark int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i := mark; i < len(w.paths); i++ {
		if w.accepted[i] {
			out = append(out, w.paths[i])
		}
	}
	return out
}

// since returns the writes recorded after mark (an earlier count).
func (w *writeCounter) since(mark int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.paths[mark:]...)
}

// dryRunsSince returns the dry runs recorded after mark (an earlier
// dryRunCount).
func (w *writeCounter) dryRunsSince(mark int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.dryRuns[mark:]...)
}

func (w *writeCounter) dryRunCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dryRuns)
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.paths)
}

// writesTo filters writes to paths containing fragment (e.g. a namespace).
func writesTo(writes []string, fragment string) []string {
	var out []string
	for _, p := range writes {
		if strings.Contains(p, fragment) {
			out = append(out, p)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "an apiserver (envtest, from bin/k8s)", run)
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	// Only the Memcached CRD: this suite does not depend on the other
	// controllers' CRDs. The ServiceMonitor CRD is installed by the test that
	// needs it, once it has seen the cluster without it. cert-manager's
	// Certificate CRD (make cert-manager-crd) is there from the start, so
	// the manager watches Certificates as in a cluster with cert-manager
	// (without it: certificate_test.go in the controller's package).
	te, err := testenv.Start(testenv.Options{Scheme: scheme, CRDs: []string{"cache.runbook.dev_memcacheds.yaml"},
		ExtraCRDPaths: []string{testenv.CertificateCRD()}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = te.Stop() }()

	// The manager runs as a user holding only the generated ClusterRole
	// (config/rbac/role.yaml), so every test also proves the RBAC markers.
	if err := bindManagerRole(te.Client); err != nil {
		fmt.Fprintln(os.Stderr, "RBAC:", err)
		return 1
	}
	writes := &writeCounter{}
	mgrCfg := rest.CopyConfig(te.Config)
	mgrCfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser}
	unwrapped := rest.CopyConfig(mgrCfg)
	mgrCfg.Wrap(writes.wrap)
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	// Secrets are not watched but read again: shortened so that a test sees
	// a Secret created or renewed within seconds.
	r, err := mccontroller.Setup(mgr, mccontroller.Options{MaxConcurrentReconciles: 2,
		SecretRecheck: secretRecheck, SecretResync: 2 * secretRecheck,
		Issuance: mccontroller.IssuancePolicy{AllowedClusterIssuers: []string{allowedClusterIssuer}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	managerClient, err := client.New(mgrCfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	watcher, err := client.NewWithWatch(te.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env = suite{client: te.Client, managerClient: managerClient, reconciler: r, writes: writes, watcher: watcher,
		managerConfig: unwrapped, scheme: scheme}
	return m.Run()
}

// zapLevel is info, or debug with MEMCACHED_TEST_DEBUG set.
func zapLevel() zapcore.Level {
	if os.Getenv("MEMCACHED_TEST_DEBUG") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.InfoLevel
}

// managerUser is the identity the in-process manager impersonates.
const managerUser = "runbook-memcached-test-manager"

// bindManagerRole installs the generated manager ClusterRole and binds it to
// managerUser.
func bindManagerRole(c client.Client) error {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		return fmt.Errorf("parsing config/rbac/role.yaml: %w", err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, role); err != nil {
		return err
	}
	return c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: managerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	})
}

// newNamespace creates a namespace with a random name for one test and
// deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	return testenv.CreateNamespace(t, env.client, "mc")
}

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
	// secretRecheck is the suite's --memcached-secret-resync-period/2 and
	// recheck of Secrets that may not be used yet.
	secretRecheck = time.Second
)
