package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// The demo starts the manager through its spawner (cluster.StartManagerWith)
// so that the manager dies with the demo: it runs in its own process group (a
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
