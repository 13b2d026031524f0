package main

import (
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// console is the demo's output: the terminal (or whatever stdout is) and,
// always, the demo's log file. A write that fails on stdout (its reader went
// away: `make demo | head`, or `| tee` killed by Ctrl-C) never kills the
// demo: the demo ignores SIGPIPE's default action, keeps writing to the log
// file, and gone is closed so that run tears everything down.
type console struct {
	mu     sync.Mutex
	stdout io.Writer
	log    io.Writer
	gone   chan struct{}
	once   sync.Once
}

func newConsole(stdout *os.File, log io.Writer) *console {
	c := &console{stdout: stdout, log: log, gone: make(chan struct{})}
	go c.watch(stdout)
	return c
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.log != nil {
		_, _ = c.log.Write(p)
	}
	if c.stdout != nil {
		if _, err := c.stdout.Write(p); err != nil {
			c.stdout = nil
			c.markGone()
		}
	}
	return len(p), nil
}

func (c *console) markGone() { c.once.Do(func() { close(c.gone) }) }

// Gone is closed when stdout's reader has gone away.
func (c *console) Gone() <-chan struct{} { return c.gone }

// watch notices a pipe (or socket) on stdout whose reader went away while
// the demo has nothing to write: poll reports POLLERR on the write end of
// a pipe without readers, POLLHUP on a hung-up terminal or socket.
func (c *console) watch(f *os.File) {
	fd := int32(f.Fd())
	for {
		fds := []unix.PollFd{{Fd: fd, Events: 0}}
		n, err := unix.Poll(fds, 500)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return
		case n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			c.mu.Lock()
			c.stdout = nil
			c.mu.Unlock()
			c.markGone()
			return
		}
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
