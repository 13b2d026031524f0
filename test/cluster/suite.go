package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// Suite is what an end-to-end package's TestMain needs before its tests: a
// cluster with Runbook's CRDs established and the manager binary built.
// Each package then starts the manager with its own flags.
type Suite struct {
	*Cluster
	// ManagerBinary is the manager built from the working tree.
	ManagerBinary string
	// WorkDir is a scratch directory removed by Stop.
	WorkDir string
}

// StartSuite starts the cluster, installs config/crd/bases and builds the
// manager. On error nothing is left running.
func StartSuite(ctx context.Context, opts Options) (*Suite, error) {
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the e2e cluster: %w", err)
	}
	s := &Suite{Cluster: c}
	if err := s.setup(ctx, opts.NamePrefix); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Suite) setup(ctx context.Context, prefix string) error {
	if _, err := s.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	if err := s.WaitCRDsEstablished(ctx, 2*time.Minute); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", prefix+"-e2e-")
	if err != nil {
		return err
	}
	s.WorkDir = dir
	if s.ManagerBinary, err = BuildManager(ctx, dir); err != nil {
		return err
	}
	return nil
}

// Stop deletes the cluster and the scratch directory.
func (s *Suite) Stop() {
	s.Cluster.Stop()
	if s.WorkDir != "" {
		_ = os.RemoveAll(s.WorkDir)
	}
}
