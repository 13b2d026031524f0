package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RestartAPIServer stops the cluster's kube-apiserver (SIGTERM, a graceful
// shutdown, which drains open requests for up to a minute) and starts it
// again with the same command line, environment and working directory, then
// waits until it answers /readyz. etcd and kwok keep running, as when an
// apiserver instance is restarted in a real cluster. kube-controller-manager
// and kube-scheduler exit on purpose when they cannot renew their leader
// Lease during the outage; as the kubelet restarts them in a real control
// plane, RestartAPIServer starts whichever component exited again (the
// names are returned). It returns how long the apiserver was gone.
//
// (`kwokctl stop cluster` + `start cluster` would restart kwok too, whose
// new identity then waits out the old one's 200 s node leases before any
// pod runs.)
func (c *Cluster) RestartAPIServer(ctx context.Context) (time.Duration, []string, error) {
	var comps []*component
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"} {
		comp, err := c.findComponent(name)
		if err != nil {
			return 0, nil, err
		}
		comps = append(comps, comp)
	}
	apiserver := comps[1]
	start := time.Now()
	if err := syscall.Kill(apiserver.pid, syscall.SIGTERM); err != nil {
		return 0, nil, fmt.Errorf("stopping kube-apiserver (pid %d): %w", apiserver.pid, err)
	}
	for alive(apiserver.pid) {
		if time.Since(start) > 2*time.Minute {
			_ = syscall.Kill(apiserver.pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := apiserver.start(); err != nil {
		return 0, nil, err
	}
	for {
		out, err := c.Kubectl(ctx, "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			break
		}
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("kube-apiserver of cluster %s not ready after a restart: %w (last: %v)", c.Name, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	down := time.Since(start)
	var restarted []string
	for _, comp := range comps {
		if comp == apiserver || alive(comp.pid) {
			continue
		}
		if err := comp.start(); err != nil {
			return down, restarted, err
		}
		restarted = append(restarted, comp.name)
	}
	return down, restarted, nil
}

// component is a control-plane process kwokctl started, with what it takes
// to start it again the same way.
type component struct {
	name      string
	pid       int
	argv, env []string
	cwd, log  string
}

func (c *Cluster) findComponent(name string) (*component, error) {
	dir := filepath.Join(c.workdir, "clusters", c.Name)
	bin := filepath.Join(dir, "bin", name)
	for _, pid := range ProcessesMentioning(bin, false) {
		argv, err := procNulList(pid, "cmdline")
		if err != nil || len(argv) == 0 || argv[0] != bin {
			continue
		}
		env, err := procNulList(pid, "environ")
		if err != nil {
			return nil, err
		}
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if err != nil {
			return nil, err
		}
		return &component{name: name, pid: pid, argv: argv, env: env, cwd: cwd, log: filepath.Join(dir, "logs", name+".log")}, nil
	}
	return nil, fmt.Errorf("cluster %s: no running %s", c.Name, bin)
}

// start runs the component again, detached like kwokctl's own processes;
// Stop kills it with the rest (its binary lies inside the work directory).
func (comp *component) start() error {
	logFile, err := os.OpenFile(comp.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	// The child holds its own descriptor; ours is closed once it started.
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(comp.argv[0], comp.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = comp.env, comp.cwd, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", comp.name, err)
	}
	comp.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return nil
}

func procNulList(pid int, file string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), file))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
		out = append(out, string(f))
	}
	return out, nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
