package testenv

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running envtest control plane with the project's CRDs installed.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Start brings up kube-apiserver and etcd with every CRD under
// config/crd/bases installed and returns a client built on scheme.
func Start(scheme *runtime.Scheme) (*Env, error) {
	if err := RequireBinaries("kube-apiserver", "etcd", "kubectl"); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: BinDir(),
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest from %s: %w", BinDir(), err)
	}
	// Tests create many objects quickly; client-go's default client-side
	// rate limit (QPS 5) would make them slow, not more realistic.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("building client: %w", err)
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}
