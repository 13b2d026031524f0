package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServerProfiler fetches kube-apiserver's CPU profiles of a benchmark's
// phases with the cluster admin's credentials, into a directory a
// benchmark's environment variable names. It leaves the manager
// unprofiled, so that a fast run and a slow run of the same code can be
// compared on what the apiserver spent its cores on meanwhile.
type APIServerProfiler struct {
	dir string
	rc  rest.Interface
	// done is the running profile's result; StartCPU may run on a timer's
	// goroutine.
	mu   sync.Mutex
	done chan error
}

// NewAPIServerProfiler returns nil unless the environment variable dirVar
// names a directory.
func NewAPIServerProfiler(dirVar string, admin *rest.Config) (*APIServerProfiler, error) {
	dir := os.Getenv(dirVar)
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
	return &APIServerProfiler{dir: dir, rc: cs.CoreV1().RESTClient()}, nil
}

// StartCPU profiles kube-apiserver for d (whole seconds, at least one), in
// the background, into <dir>/<name>.cpu. A nil profiler does nothing.
func (p *APIServerProfiler) StartCPU(ctx context.Context, name string, d time.Duration) {
	if p == nil {
		return
	}
	done := make(chan error, 1)
	p.mu.Lock()
	p.done = done
	p.mu.Unlock()
	go func() {
		body, err := p.rc.Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(max(1, int(d.Seconds())))).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(p.dir, name+".cpu"), body, 0o644)
		}
		if err != nil {
			err = fmt.Errorf("kube-apiserver CPU profile: %w", err)
		}
		done <- err
	}()
}

// Wait returns what StartCPU ended with (nil when nothing was asked for).
func (p *APIServerProfiler) Wait() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	done := p.done
	p.done = nil
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	return <-done
}

// Dir is where the profiles go.
func (p *APIServerProfiler) Dir() string { return p.dir }
