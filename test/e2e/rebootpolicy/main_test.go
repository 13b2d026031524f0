// Package rebootpolicy runs the RebootPolicy end to end: the real manager
// binary (--controllers=rebootpolicy) against a kwok cluster whose
// controller-manager really rolls Deployments, StatefulSets and DaemonSets.
// It replays the seed's demo with MariaDB, then an exec trigger and the
// StatefulSet and DaemonSet targets.
package rebootpolicy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

var (
	kc      *cluster.Cluster
	k8s     client.Client
	mgr     *cluster.Manager
	execDir string
)

func TestMain(m *testing.M) {
	testenv.RunSuite(m, "a local cluster (kwok), the manager binary and the machine's MariaDB", run)
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suite, err := cluster.StartSuite(ctx, cluster.Options{Nodes: 3, NamePrefix: "rbp"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	c := suite.Cluster
	kc = c
	logf.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = autorebootv1alpha1.AddToScheme(scheme)
	k8s, err = client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	execDir = filepath.Join(suite.WorkDir, "probes")
	if err := os.Mkdir(execDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := suite.ManagerBinary
	if _, err := c.Kubectl(ctx, "create", "namespace", operatorNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// As an admin would: the machine's databases by exact address and port,
	// nothing else on loopback.
	mgr, err = cluster.StartManager(ctx, bin, c.Kubeconfig, "--controllers=rebootpolicy", "--exec-probe-dir="+execDir, "--zap-log-level=info",
		"--operator-namespace="+operatorNamespace, "--probe-allow=127.0.0.1:3306,127.0.0.1:5432")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the manager:", err)
		return 1
	}
	code := m.Run()
	mgr.DumpLogsOnFailure(code != 0)
	_ = mgr.Stop()
	return code
}

// operatorNamespace is the manager's own namespace (fingerprint key).
const operatorNamespace = "runbook-system"

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
