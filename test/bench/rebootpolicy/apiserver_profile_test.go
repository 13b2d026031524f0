package rebootpolicy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiserverProfiler fetches kube-apiserver's CPU profile of the flip
// (BENCH_RBP_APISERVER_PROFILE_DIR) with the cluster admin's credentials.
// Unlike BENCH_RBP_PROFILE_DIR it leaves the manager unprofiled, so a fast
// run and a slow run of the same code can be compared on what the
// apiserver spent its cores on while the restarts waited for it.
type apiserverProfiler struct {
	dir  string
	rc   rest.Interface
	done chan error
}

// newAPIServerProfiler returns nil unless BENCH_RBP_APISERVER_PROFILE_DIR
// is set.
func newAPIServerProfiler(admin *rest.Config) (*apiserverProfiler, error) {
	dir := os.Getenv("BENCH_RBP_APISERVER_PROFILE_DIR")
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	return &apiserverProfiler{dir: dir, rc: cs.CoreV1().RESTClient()}, nil
}

// startCPU profiles kube-apiserver for d, in the background.
func (p *apiserverProfiler) startCPU(ctx context.Context, name string, d time.Duration) {
	p.done = make(chan error, 1)
	go func() {
		body, err := p.rc.Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(p.dir, name+".cpu"), body, 0o644)
		}
		if err != nil {
			err = fmt.Errorf("kube-apiserver CPU profile: %w", err)
		}
		p.done <- err
	}()
}

// wait returns what startCPU ended with (nil when nothing was asked for).
func (p *apiserverProfiler) wait() error {
	if p == nil || p.done == nil {
		return nil
	}
	return <-p.done
}
