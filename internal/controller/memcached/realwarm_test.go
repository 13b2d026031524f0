package memcached

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// warmArgs are the memcached args of a warm Memcached with the memory file
// moved into dir (the pod's memory emptyDir).
func warmArgs(t *testing.T, dir string) []string {
	t.Helper()
	args := memcachedArgs(resolved(t, &cachev1alpha1.Memcached{Spec: cachev1alpha1.MemcachedSpec{WarmRestart: true, MemoryMiB: ptr.To[int32](cachev1alpha1.MinWarmRestartMemoryMiB)}}))
	i := slices.Index(args, cachev1alpha1.WarmRestartMemoryFile)
	if i < 1 || args[i-1] != "-e" {
		t.Fatalf("args %q lack -e %s", args, cachev1alpha1.WarmRestartMemoryFile)
	}
	args[i] = filepath.Join(dir, "memory")
	return args
}

// stopWith signals srv and waits for it to exit; it returns the exit code
// and when it exited.
func stopWith(t *testing.T, srv *realServer, sig syscall.Signal) (int, time.Time) {
	t.Helper()
	if err := srv.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("memcached did not exit on %v", sig)
	}
	return srv.cmd.ProcessState.ExitCode(), time.Now()
}

// afterSecond waits (polling the clock) until the wall clock is past the
// second of at: memcached refuses a memory file saved in the current second.
func afterSecond(at time.Time) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Unix() <= at.Unix() {
		<-tick.C
	}
}

func currItems(t *testing.T, srv *realServer) int {
	t.Helper()
	c, err := dialPlain(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprint(c.conn, "stats\r\n"); err != nil {
		t.Fatal(err)
	}
	n := -1
	for {
		l, err := c.readLine()
		if err != nil {
			t.Fatal(err)
		}
		if l == "END" {
			return n
		}
		if v, ok := strings.CutPrefix(l, "STAT curr_items "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
}

// The rendered command line in real memcached: SIGUSR1 (the stop signal
// warmRestart sets) keeps every item for the next memcached on the same
// file; SIGTERM and SIGKILL do not, and a start within the second of the
// stop does not either — the outcomes status.lastRestart reports.
func TestRealMemcachedWarmRestart(t *testing.T) {
	dir := t.TempDir()
	// memcached drops to an unprivileged user: it must reach the file.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	args := warmArgs(t, dir)
	start := func() *realServer {
		res := startArgs(t, args)
		if res.exited {
			t.Fatalf("memcached %q exited at start: %s", args, res.srv.output())
		}
		return res.srv
	}
	fill := func(srv *realServer, n int) {
		c, err := dialPlain(srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range n {
			if err := c.setGet(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	srv := start()
	fill(srv, 50)
	code, stopped := stopWith(t, srv, syscall.SIGUSR1)
	if code != 0 {
		t.Fatalf("exit code %d after SIGUSR1, want 0: %s", code, srv.output())
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.meta")); err != nil {
		t.Fatalf("no metadata saved beside the memory file: %v", err)
	}
	afterSecond(stopped)
	srv = start()
	if n := currItems(t, srv); n != 50 {
		t.Fatalf("curr_items %d after SIGUSR1 and a restart, want 50: %s", n, srv.output())
	}
	c, err := dialPlain(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.command("get k49"); err != nil || r != "VALUE k49 0 3" {
		t.Fatalf("get k49 after a warm restart: %q, %v", r, err)
	}
	c.Close()

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		fill(srv, 10)
		code, stopped := stopWith(t, srv, sig)
		afterSecond(stopped)
		srv = start()
		if n := currItems(t, srv); n != 0 {
			t.Fatalf("curr_items %d after %v (exit code %d), want a cold start", n, sig, code)
		}
		t.Logf("%v: exit code %d, the next memcached starts empty", sig, code)
	}

	fill(srv, 10)
	_, _ = stopWith(t, srv, syscall.SIGUSR1)
	srv = start() // within the same second, most likely: see below
	if n := currItems(t, srv); n != 0 && n != 10 {
		t.Fatalf("curr_items %d", n)
	} else {
		t.Logf("SIGUSR1 then an immediate start: curr_items %d (0 when memcached started in the second it stopped: %s)", n, strings.TrimSpace(srv.output()))
	}
}
