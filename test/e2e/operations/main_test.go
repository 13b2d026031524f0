// Package operations proves how Runbook behaves when it is operated: the real
// manager binary authenticated as the ServiceAccount that config/rbac binds
// (least privilege, not admin), two managers with leader election losing
// their leader to SIGKILL and SIGTERM, a restart of the whole control plane
// under a running manager, and an outage of the MariaDB an sql trigger
// queries. Everything runs on one kwok cluster whose etcd, kube-apiserver
// (RBAC authorization on), kube-controller-manager and scheduler are real.
package operations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const (
	// systemNamespace is where config/rbac's ServiceAccount, the leader
	// election Role and the Lease live, as in config/default.
	systemNamespace = "runbook-system"
	serviceAccount  = "controller-manager"

	timeout = 4 * time.Minute
	poll    = 250 * time.Millisecond
)

var (
	kc *cluster.Cluster
	// k8s is an admin client for the test's own reads and writes.
	k8s client.Client
	// managerBin is the manager built from ./cmd.
	managerBin string
	// saKubeconfig authenticates with a token of the manager's
	// ServiceAccount, so everything the manager does is authorized by the
	// ClusterRole generated from the controllers' markers.
	saKubeconfig string
	workDir      string
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local cluster (kwok), the manager binary and MariaDB", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())
	suite, err := cluster.StartSuite(ctx, cluster.Options{Nodes: 3, NamePrefix: "ops"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	kc = suite.Cluster
	workDir, managerBin = suite.WorkDir, suite.ManagerBinary
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the operations suite:", err)
		return 1
	}
	return m.Run()
}

func setup(ctx context.Context) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	var err error
	if k8s, err = client.New(kc.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if _, err := kc.Kubectl(ctx, "create", "namespace", systemNamespace); err != nil {
		return err
	}
	if err := installRBAC(ctx); err != nil {
		return err
	}
	token, err := kc.Kubectl(ctx, "create", "token", serviceAccount, "-n", systemNamespace, "--duration=2h")
	if err != nil {
		return fmt.Errorf("requesting a token for the ServiceAccount: %w", err)
	}
	saKubeconfig = filepath.Join(workDir, "serviceaccount.kubeconfig")
	return cluster.WriteTokenKubeconfig(kc.Kubeconfig, saKubeconfig, strings.TrimSpace(token))
}

// installRBAC applies config/rbac as config/default would, with the
// namespace set to runbook-system but without config/default's name
// prefix: the ServiceAccount is controller-manager, the ClusterRole
// manager-role.
func installRBAC(ctx context.Context) error {
	dir := filepath.Join(workDir, "rbac-overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if err != nil {
		return err
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n- %s\n", systemNamespace, rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		return err
	}
	rendered, err := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "bin", "kustomize-v5.8.2"), "build", dir).Output()
	if err != nil {
		return fmt.Errorf("kustomize build config/rbac: %w", err)
	}
	file := filepath.Join(workDir, "rbac.yaml")
	if err := os.WriteFile(file, rendered, 0o600); err != nil {
		return err
	}
	if _, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", file); err != nil {
		return fmt.Errorf("applying config/rbac: %w", err)
	}
	return nil
}

// startManager runs the manager binary and stops it (SIGTERM) when the test
// ends, dumping its logs if the test failed.
func startManager(t *testing.T, kubeconfig string, args ...string) *cluster.Manager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The admin's choices come first, so that a test's own flags win.
	defaults := []string{"--zap-log-level=info", "--operator-namespace=" + systemNamespace, "--probe-allow=127.0.0.1:3306,127.0.0.1:5432"}
	m, err := cluster.StartManager(ctx, managerBin, kubeconfig, append(defaults, args...)...)
	if err != nil {
		t.Fatalf("starting the manager: %v", err)
	}
	t.Cleanup(func() {
		select {
		case <-m.Exited():
		default:
			_ = m.Stop()
		}
		if t.Failed() {
			t.Logf("---- manager (pid %d) logs ----\n%s\n---- end of manager logs ----", m.Pid(), m.Logs())
		}
	})
	return m
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
