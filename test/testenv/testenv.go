package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Env is a running envtest control plane with the project's CRDs installed.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Options say what a suite's control plane holds.
type Options struct {
	// Scheme of the returned client (and of the CRD installation).
	Scheme *runtime.Scheme
	// CRDs are file names under config/crd/bases to install; empty means
	// all of them. A suite names its own, so it does not depend on another
	// controller's CRD.
	CRDs []string
	// ExtraCRDPaths are further CRD files or directories (test fixtures
	// such as prometheus-operator's ServiceMonitor).
	ExtraCRDPaths []string
	// Namespaces are created once the control plane is up (a suite's
	// operator namespace).
	Namespaces []string
}

// Start brings up kube-apiserver and etcd with the CRDs of opts and returns
// a client built on opts.Scheme. Every envtest suite starts this way.
func Start(opts Options) (*Env, error) {
	if err := RequireBinaries("kube-apiserver", "etcd", "kubectl"); err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
	if len(opts.CRDs) > 0 {
		paths = paths[:0]
		for _, f := range opts.CRDs {
			paths = append(paths, filepath.Join(RepoRoot(), "config", "crd", "bases", f))
		}
	}
	env := &envtest.Environment{
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              append(paths, opts.ExtraCRDPaths...),
			ErrorIfPathMissing: true,
		},
		BinaryAssetsDirectory: BinDir(),
		Scheme:                opts.Scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest from %s: %w", BinDir(), err)
	}
	// Tests create many objects quickly; client-go's default client-side
	// rate limit (QPS 5) would make them slow, not more realistic.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("building client: %w", err)
	}
	for _, ns := range opts.Namespaces {
		if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			_ = env.Stop()
			return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// RunWithManager is the run (see RunSuite) of a suite whose tests share one
// manager: it starts the control plane of opts, has setup build the manager
// on it, runs the tests while the manager runs and returns their code once
// it has stopped. What fails before the tests is said on stderr, and the
// code is 1.
func RunWithManager(m *testing.M, opts Options, setup func(*Env) (manager.Manager, error)) int {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = e.Stop() }()
	mgr, err := setup(e)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}
