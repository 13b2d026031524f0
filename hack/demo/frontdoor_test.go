package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestReadmeMakeDemoOnFreshClone runs the README's first command as a
// newcomer does: `make demo` in a fresh clone of the commit under test, in a
// terminal's process group, until it says every sample is Ready and what to
// try; then Ctrl-C, after which nothing of it may be left. The other demo
// tests start the demo binary their own way, which is how `mkdir bin/demo:
// not a directory` (binary and state folder at the same path) shipped.
func TestReadmeMakeDemoOnFreshClone(t *testing.T) {
	testenv.SkipUnderShort(t, "a fresh clone, `make demo`, a kwok cluster, MariaDB and PostgreSQL")
	if err := testenv.RequireBinaries(binaries()...); err != nil {
		t.Fatal(err)
	}
	clone := cloneHead(t)
	seedControlPlane(t, clone)
	seedNodeBinaries(t, clone)
	t.Cleanup(func() { stopProcesses(clone, 5*time.Second) }) // last resort, after the demo's own cleanup

	cmd := exec.Command("make", "demo")
	cmd.Dir = clone
	cmd.Env = terminalEnv()
	d := startInGroup(t, cmd, filepath.Join(clone, "bin", "demo"))

	// Bounded: a cold Go build cache compiles controller-gen, the demo, the
	// manager and the plugin first.
	m := d.waitLine(t, regexp.MustCompile(`(\d+) of (\d+) samples Ready`), withinDeadline(t, 20*time.Minute))
	if want := strconv.Itoa(countSamples(t)); m[1] != m[2] || m[2] != want {
		t.Fatalf("%s of %s samples Ready, want all %s (config/samples)", m[1], m[2], want)
	}
	// What the user read up to here: no library's complaint (a
	// controller-runtime client without a logger printed a stack trace).
	for _, l := range d.seen {
		if strings.Contains(l, "was never called") || strings.Contains(l, "goroutine ") {
			t.Errorf("the demo's output carries a stack trace: %q", l)
		}
	}
	st := d.runningState(t)
	if !strings.HasPrefix(st.RunDir, clone+string(filepath.Separator)) {
		t.Fatalf("the demo runs in %s, not in the clone %s", st.RunDir, clone)
	}
	// Loaded now: the kubeconfig goes with the run directory.
	apiserver := demoAPIServer(t, st.Kubeconfig)
	if err := apiserver.ready(); err != nil {
		t.Fatalf("positive control: the demo's kube-apiserver does not answer while the demo runs: %v", err)
	}

	// Ctrl-C in the terminal: SIGINT to the foreground process group, make
	// and the demo alike.
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// make waits for the demo's teardown, then dies of the SIGINT itself.
	if err := d.waitExit(t, 3*time.Minute); err != nil && !killedBy(err, syscall.SIGINT) {
		t.Fatalf("make demo exited with %v after Ctrl-C", err)
	}
	assertNothingSurvives(t, st, 0)
	if left := cluster.ProcessesMentioning(clone, false); len(left) > 0 {
		t.Errorf("processes mentioning the clone survive Ctrl-C: %v", describe(left))
	}
	if err := apiserver.ready(); err == nil {
		t.Errorf("the demo's kube-apiserver (%s) still answers after Ctrl-C", apiserver.host)
	}
	log, err := os.ReadFile(filepath.Join(d.stateDir, "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "done: every process the demo started has stopped"; !strings.Contains(string(log), want) {
		t.Errorf("demo.log lacks %q", want)
	}
}

// withinDeadline caps d so that the test fails with the demo's output, and
// its cleanup tears the demo down, before go test's -timeout panics (which
// would leave the demo's cluster running).
func withinDeadline(t *testing.T, d time.Duration) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - 2*time.Minute; left < d {
			return max(left, time.Second)
		}
	}
	return d
}

// cloneHead clones the repository this test runs in, at its committed HEAD
// (what CI runs; uncommitted changes are not part of it), into a temporary
// folder. Fetching HEAD by name also covers a detached CI checkout.
func cloneHead(t *testing.T) string {
	t.Helper()
	root := testenv.RepoRoot()
	head := strings.TrimSpace(git(t, root, "rev-parse", "HEAD"))
	clone := filepath.Join(t.TempDir(), "runbook")
	git(t, "", "clone", "--quiet", "--no-checkout", root, clone)
	git(t, clone, "fetch", "--quiet", root, "HEAD")
	git(t, clone, "checkout", "--quiet", "--detach", "FETCH_HEAD")
	if got := strings.TrimSpace(git(t, clone, "rev-parse", "HEAD")); got != head {
		t.Fatalf("the clone is at %s, want %s", got, head)
	}
	if _, err := os.Lstat(filepath.Join(clone, "bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("positive control: a fresh clone has no bin/ (%v)", err)
	}
	return clone
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// seedControlPlane links the control-plane binaries this repository built
// into the clone's bin/k8s, with their version stamps, so `make demo` does
// not spend 15 minutes building Kubernetes again.
//
// This hides no front-door defect: `make demo` still runs its k8s-binaries
// step (hack/build-k8s.sh from the clone), which takes each binary as built
// only when its stamp names the version the clone's script pins — so a
// binary of another version is rebuilt, into the clone (go build replaces the
// link, never the file it points to). The links sit where a first build
// writes the binaries, in a bin/ that holds nothing else, so every path the
// demo creates (bin/runbook-demo, bin/demo, bin/manager, bin/kubectl-runbook,
// the tools) meets a fresh clone's bin/. What is not exercised here is the
// cold build itself; CI's fresh-clone run builds bin/k8s before the tests.
func seedControlPlane(t *testing.T, clone string) {
	t.Helper()
	src, err := filepath.EvalSymlinks(testenv.BinDir())
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(clone, "bin", "k8s")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range binaries() {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
		stamp, err := os.ReadFile(filepath.Join(src, name+".version"))
		if err != nil {
			t.Fatalf("%s has no version stamp: %v (built by hack/build-k8s.sh?)", name, err)
		}
		if err := os.WriteFile(filepath.Join(dst, name+".version"), stamp, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// seedNodeBinaries links the real node's binaries (hack/build-node.sh) into
// the clone's bin/node the same way, when this repository has them, so that
// `make demo`'s node-binaries step finds them current instead of building
// them again. Without them the step builds them, as on a fresh machine.
func seedNodeBinaries(t *testing.T, clone string) {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(), "bin", "node")
	stamps, _ := filepath.Glob(filepath.Join(src, "*.version"))
	if len(stamps) == 0 {
		return
	}
	dst := filepath.Join(clone, "bin", "node")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, stamp := range stamps {
		name := strings.TrimSuffix(filepath.Base(stamp), ".version")
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(stamp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name+".version"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// binaries are what hack/build-k8s.sh builds into bin/k8s.
func binaries() []string {
	return []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok", "kwokctl"}
}

// terminalEnv is this process's environment without what a newcomer's
// terminal does not have: the variables of a `make test` that runs this test
// (make would run as a sub-make, with its flags) and the overrides of where
// the control-plane binaries are.
func terminalEnv() []string {
	drop := map[string]bool{"MAKEFLAGS": true, "MAKELEVEL": true, "MFLAGS": true, "MAKEOVERRIDES": true,
		"GNUMAKEFLAGS": true, "DEMO_FLAGS": true, "RUNBOOK_K8S_BIN": true, "K8S_BIN_DIR": true}
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			env = append(env, kv)
		}
	}
	return env
}

// demoServer is the demo cluster's kube-apiserver as its kubeconfig names
// it: its address, CA and admin credentials. Asking it with those, rather
// than dialling the port, cannot mistake another process that took the
// freed port afterwards (another test's cluster) for the demo's.
type demoServer struct {
	host   string
	client *http.Client
	url    string
}

func demoAPIServer(t *testing.T, kubeconfig string) *demoServer {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return &demoServer{host: u.Host, client: c, url: strings.TrimSuffix(cfg.Host, "/") + "/readyz"}
}

// ready is nil when the server answers /readyz with 200.
func (s *demoServer) ready() error {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	return nil
}

func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
