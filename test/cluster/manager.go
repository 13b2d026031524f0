package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// BuildManager compiles the manager binary (./cmd) into dir and returns its
// path. End-to-end suites run the real binary, so main's wiring is tested too.
func BuildManager(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd")
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd: %w\n%s", err, b)
	}
	return out, nil
}

// Manager is a manager process running against a cluster.
type Manager struct {
	cmd       *exec.Cmd
	HealthURL string
	logs      *testenv.SyncBuffer
	done      chan struct{}
	waitErr   error
}

// StartManager runs binary against kubeconfig with extra flags and waits
// until /readyz answers 200. Health and metrics ports are picked free.
func StartManager(ctx context.Context, binary, kubeconfig string, args ...string) (*Manager, error) {
	return StartManagerWith(ctx, startInOwnGroup, binary, kubeconfig, args...)
}

// StartManagerWith is StartManager with the caller starting the process
// (the demo starts it from a locked thread with a parent-death signal).
// start must put the process in its own process group: Stop and Kill
// signal the group.
func StartManagerWith(ctx context.Context, start func(*exec.Cmd) error, binary, kubeconfig string, args ...string) (*Manager, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	m := &Manager{HealthURL: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &testenv.SyncBuffer{}, done: make(chan struct{})}
	all := append([]string{
		"--kubeconfig", kubeconfig,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--metrics-bind-address", "0",
	}, args...)
	m.cmd = exec.Command(binary, all...)
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	if err := start(m.cmd); err != nil {
		return nil, fmt.Errorf("starting manager: %w", err)
	}
	go func() { m.waitErr = m.cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-m.done:
			return nil, fmt.Errorf("manager exited before it was ready: %v\n%s", m.waitErr, m.Logs())
		case <-ctx.Done():
			m.Kill()
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
			m.Kill()
			return nil, fmt.Errorf("manager not ready after 2m\n%s", m.Logs())
		}
	}
}

func startInOwnGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after 30 s).
func (m *Manager) Stop() error {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.done:
		return m.waitErr
	case <-time.After(30 * time.Second):
		m.Kill()
		return fmt.Errorf("manager ignored SIGTERM for 30s")
	}
}

// Kill sends SIGKILL to the manager's process group and waits for it.
func (m *Manager) Kill() {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.done
}

// Pid is the manager's process id.
func (m *Manager) Pid() int { return m.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (m *Manager) Exited() <-chan struct{} { return m.done }

// Logs returns everything the manager wrote so far.
func (m *Manager) Logs() string { return m.logs.String() }

// DumpLogsOnFailure writes the manager's logs to stderr, for a failed test.
func (m *Manager) DumpLogsOnFailure(failed bool) {
	if failed {
		fmt.Fprintf(os.Stderr, "---- manager logs ----\n%s\n---- end of manager logs ----\n", m.Logs())
	}
}

// FreePort asks the kernel for a free TCP port on the loopback interface.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct free loopback ports: all listeners stay open
// until every port is chosen, so the kernel cannot hand one out twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
