package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profiler fetches the manager's Go profiles (BENCH_RBP_PROFILE_DIR): a
// CPU profile of the steady window, then its heap and goroutines. The
// figures of a profiled run are perturbed by the profiling; the SUMMARY
// says so.
type profiler struct {
	dir, addr string
	cpu       chan error
	traced    chan error
}

// newProfiler returns nil unless BENCH_RBP_PROFILE_DIR is set; its flag
// serves the manager's profiles on a free loopback port.
func newProfiler() (*profiler, error) {
	dir := os.Getenv("BENCH_RBP_PROFILE_DIR")
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	return &profiler{dir: dir, addr: addr}, nil
}

func (p *profiler) flag() string { return "--pprof-bind-address=" + p.addr }

// startCPU profiles the CPU for d, in the background.
func (p *profiler) startCPU(ctx context.Context, name string, d time.Duration) {
	p.cpu = make(chan error, 1)
	go func() {
		p.cpu <- p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), name+".cpu")
	}()
}

// finish waits for the CPU profile and fetches the heap and goroutines.
func (p *profiler) finish(ctx context.Context, name string) error {
	if p.cpu != nil {
		if err := <-p.cpu; err != nil {
			return err
		}
	}
	if err := p.fetch(ctx, "heap", name+".heap"); err != nil {
		return err
	}
	return p.fetch(ctx, "goroutine", name+".goroutine")
}

// trace records an execution trace (name.trace) and a CPU profile
// (name.cpu) for d, in the background: the trace says what waited, the
// profile what ran.
func (p *profiler) trace(ctx context.Context, name string, d time.Duration) {
	p.traced = make(chan error, 2)
	go func() {
		p.traced <- p.fetch(ctx, fmt.Sprintf("trace?seconds=%d", int(d.Seconds())), name+".trace")
	}()
	go func() {
		p.traced <- p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), name+".cpu")
	}()
}

// wait waits for what trace started.
func (p *profiler) wait() error {
	if p.traced == nil {
		return nil
	}
	return errors.Join(<-p.traced, <-p.traced)
}

func (p *profiler) fetch(ctx context.Context, what, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/debug/pprof/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", what, resp.StatusCode)
	}
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
