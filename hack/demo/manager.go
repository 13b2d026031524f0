package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
)

// The demo starts the manager itself (not with cluster.StartManager) so
// that the manager dies with the demo: it runs in its own process group (a
// Ctrl-C reaches the demo, which stops it in order) and with a parent-death
// signal, so a demo that is killed outright (SIGKILL, a crash) takes it
// along at once. The cluster's components are daemonized by kwokctl; the
// watchdog stops those.

// spawner starts processes from one OS thread that never exits: Linux
// sends the parent-death signal when the *thread* that forked a child
// exits, and Go may otherwise fork from any thread of its pool.
type spawner struct {
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the demo
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return s
}

// start starts cmd in its own process group with SIGTERM as its
// parent-death signal (the manager's graceful shutdown).
func (s *spawner) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	done := make(chan error, 1)
	s.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// demoManager is the manager process of a demo run.
type demoManager struct {
	cmd       *exec.Cmd
	HealthURL string
	logs      lockedBuffer
	done      chan struct{}
	waitErr   error
}

// startDemoManager runs the manager against kubeconfig and waits for
// /readyz; health and metrics ports are picked free.
func startDemoManager(ctx context.Context, sp *spawner, binary, kubeconfig string, args ...string) (*demoManager, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	m := &demoManager{HealthURL: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	all := append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--metrics-bind-address", "0"}, args...)
	m.cmd = exec.Command(binary, all...)
	m.cmd.Stdout, m.cmd.Stderr = &m.logs, &m.logs
	if err := sp.start(m.cmd); err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	go func() { m.waitErr = m.cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-m.done:
			return nil, fmt.Errorf("the manager exited before it was ready: %v\n%s", m.waitErr, m.Logs())
		case <-ctx.Done():
			m.kill()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := http.Get(m.HealthURL + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			m.kill()
			return nil, fmt.Errorf("the manager was not ready after 2m\n%s", m.Logs())
		}
	}
}

// Stop sends SIGTERM to the manager's process group and waits (SIGKILL
// after 30 s).
func (m *demoManager) Stop() error {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.done:
		return m.waitErr
	case <-time.After(30 * time.Second):
		m.kill()
		return fmt.Errorf("the manager ignored SIGTERM for 30s")
	}
}

func (m *demoManager) kill() {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.done
}

func (m *demoManager) Pid() int                { return m.cmd.Process.Pid }
func (m *demoManager) Exited() <-chan struct{} { return m.done }
func (m *demoManager) Logs() string            { return m.logs.String() }

// lockedBuffer is a bytes.Buffer safe for the process's two writers and
// the demo's reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
