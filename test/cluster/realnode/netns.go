package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// netNS is a network namespace held open by a file descriptor, so this
// process can create sockets inside it.
type netNS struct {
	file *os.File
}

func openNetNS(pid int) (*netNS, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	return &netNS{file: f}, nil
}

func (ns *netNS) close() {
	if ns != nil && ns.file != nil {
		_ = ns.file.Close()
	}
}

// inside runs fn on an OS thread switched into the namespace. A socket keeps
// the namespace it was created in, so what fn opens stays there after the
// thread switches back. A thread that cannot switch back is never reused:
// returning from a locked goroutine without unlocking makes the runtime end it.
func (ns *netNS) inside(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = home.Close() }()
		if err := unix.Setns(int(ns.file.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering the node's network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leaving the node's network namespace: %w", err)
			return // the thread stays locked and ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// dial connects from inside the namespace. The socket is created on the
// switched thread; the connection then completes on any thread.
func (ns *netNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := ns.inside(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// listen opens a listener inside the namespace.
func (ns *netNS) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := ns.inside(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// writeSysctl writes a /proc/sys/net value of the namespace: those files
// belong to the network namespace of the thread that opens them.
func (ns *netNS) writeSysctl(key, value string) error {
	return ns.inside(func() error {
		return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
	})
}
