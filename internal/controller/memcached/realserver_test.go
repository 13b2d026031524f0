package memcached

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// This file runs the real memcached (the Debian package: 1.6.18, built
// with TLS and SASL) the way a pod of the controller would: with the exact
// arguments of the memcached container the controller renders and the
// files its volumes would mount, laid out under a temporary directory that
// stands for the container's root. Only three things differ from the pod,
// each forced by running on the test machine: the port is a free one, the
// mount paths are prefixed with the temporary root, and as root memcached
// is told to drop to an unprivileged user (-u, put first so that it can
// never change how the pod's own arguments are read), with the files
// owned by that user's group, as fsGroup makes them in the pod.

// memcachedBinary is the real memcached, or a failure naming the fix: a
// missing prerequisite is never a skip.
func memcachedBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Fatalf("memcached is not installed (apt-get install -y memcached): %v", err)
	}
	return bin
}

// testPod is the pod of one Memcached as rendered by the controller.
type testPod struct {
	// args of the memcached container, with the mount paths moved under
	// root and the port still 11211.
	args []string
	// template is the rendered pod template (its annotations carry the
	// config and Secret hashes).
	template *corev1.PodTemplateSpec
	root     string
}

// renderPod renders mc's pod template with s, writes the files of the
// memcached container's Secret volumes (from secrets, by name) under a new
// temporary root and returns the container's arguments pointing there.
func renderPod(t *testing.T, mc *cachev1alpha1.Memcached, s settings, secrets map[string]*corev1.Secret) *testPod {
	t.Helper()
	ac, err := desiredPodTemplate(mc, s)
	if err != nil {
		t.Fatalf("rendering the pod template: %v", err)
	}
	tpl, err := convertInto(ac, &corev1.PodTemplateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// t.TempDir is private to root; memcached reads the files as the user
	// it drops to.
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := containerNamed(t, tpl.Spec, containerMemcached)
	args := c.Args
	for _, m := range c.VolumeMounts {
		writeVolume(t, volumeNamed(t, tpl.Spec, m.Name), filepath.Join(root, m.MountPath), secrets)
		args = underRoot(args, m.MountPath, root)
	}
	return &testPod{args: args, template: tpl, root: root}
}

// rewriteFiles writes the pod's Secret volumes again from secrets, as the
// kubelet does when a mounted Secret changes.
func (p *testPod) rewriteFiles(t *testing.T, secrets map[string]*corev1.Secret) {
	t.Helper()
	c := containerNamed(t, p.template.Spec, containerMemcached)
	for _, m := range c.VolumeMounts {
		writeVolume(t, volumeNamed(t, p.template.Spec, m.Name), filepath.Join(p.root, m.MountPath), secrets)
	}
}

func volumeNamed(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("the pod mounts volume %s but has none of that name", name)
	return corev1.Volume{}
}

// underRoot moves every path below mountPath in args under root.
func underRoot(args []string, mountPath, root string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, mountPath+"/", filepath.Join(root, mountPath)+"/")
	}
	return out
}

// writeVolume writes what the kubelet would put into a Secret or projected
// volume at dir: each listed key of each Secret under its path, with the
// volume's file mode, group-owned by the group memcached runs as. A Secret
// that is missing fails the test, as it would keep the pod from starting.
func writeVolume(t *testing.T, v corev1.Volume, dir string, secrets map[string]*corev1.Secret) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var projections []*corev1.SecretProjection
	var mode int32
	switch {
	case v.Projected != nil:
		mode = *v.Projected.DefaultMode
		for _, src := range v.Projected.Sources {
			if src.Secret == nil {
				t.Fatalf("volume %s projects something other than a Secret: %+v", v.Name, src)
			}
			projections = append(projections, src.Secret)
		}
	case v.Secret != nil:
		mode = *v.Secret.DefaultMode
		projections = append(projections, &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items})
	case v.EmptyDir != nil:
		// The kubelet makes an emptyDir writable for everyone.
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		return
	default:
		t.Fatalf("volume %s is of a kind the test cannot render: %+v", v.Name, v.VolumeSource)
	}
	for _, p := range projections {
		sec, ok := secrets[p.Name]
		if !ok {
			t.Fatalf("volume %s needs Secret %s, which the test did not give", v.Name, p.Name)
		}
		for _, item := range p.Items {
			writeSecretFile(t, filepath.Join(dir, item.Path), sec.Data[item.Key], os.FileMode(mode))
		}
	}
}

func writeSecretFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	// Replace, not truncate: like the kubelet's atomic writer, a reader
	// never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		t.Fatal(err)
	}
	if _, gid, ok := dropUser(t); ok {
		if err := os.Chown(tmp, 0, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// dropUser is the unprivileged user memcached runs as when the test runs
// as root (memcached refuses to run as root otherwise): memcache, which the
// Debian package creates, else nobody. ok is false when not root.
func dropUser(t *testing.T) (name string, gid int, ok bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", 0, false
	}
	for _, n := range []string{"memcache", "nobody"} {
		u, err := user.Lookup(n)
		if err != nil {
			continue
		}
		g, err := strconv.Atoi(u.Gid)
		if err != nil {
			continue
		}
		return n, g, true
	}
	t.Fatal("running as root, but there is neither a memcache nor a nobody user to run memcached as")
	return "", 0, false
}

// realServer is one running memcached.
type realServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	// stderr of the process so far.
	stderr *strings.Builder
	// exitErr is set once the process has exited.
	exitErr error
	exited  bool
}

func (s *realServer) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// lockedWriter serializes the process' writes with output().
type lockedWriter struct{ s *realServer }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.stderr.Write(b)
}

// freePort is a TCP port nothing listens on right now. Another process may
// take it before memcached does; startArgs retries then.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// withPort replaces the value of the controller's -p (the first argument
// pair) by port.
func withPort(t *testing.T, args []string, port int) []string {
	t.Helper()
	if len(args) < 2 || args[0] != "-p" {
		t.Fatalf("the controller's command line does not start with -p: %q", args)
	}
	out := append([]string{}, args...)
	out[1] = strconv.Itoa(port)
	return out
}

// startResult is how a start ended: serving (exited false), or the
// process exited first.
type startResult struct {
	srv    *realServer
	exited bool
}

// startArgs starts memcached with the pod's args on a free port and waits,
// with a deadline, until it accepts TCP connections or exits. The process
// is killed in t.Cleanup. A start that lost its port to another process is
// retried on a new one.
func startArgs(t *testing.T, args []string) startResult {
	t.Helper()
	for attempt := 0; ; attempt++ {
		res := startOnce(t, args, freePort(t))
		if res.exited && strings.Contains(res.srv.output(), "Address already in use") && attempt < 3 {
			continue
		}
		return res
	}
}

func startOnce(t *testing.T, podArgs []string, port int) startResult {
	t.Helper()
	args := withPort(t, podArgs, port)
	srv := launch(t, args, port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-srv.done:
			return startResult{srv: srv, exited: true}
		default:
		}
		if c, err := net.DialTimeout("tcp", srv.addr, time.Second); err == nil {
			_ = c.Close()
			return startResult{srv: srv}
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached %q neither listens on %s nor exits after 15s; its output: %s", args, srv.addr, srv.output())
		}
		select {
		case <-srv.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// launch starts memcached with args (the pod's, on port) and kills it in
// t.Cleanup.
func launch(t *testing.T, args []string, port int) *realServer {
	t.Helper()
	if name, _, ok := dropUser(t); ok {
		args = append([]string{"-u", name}, args...)
	}
	srv := &realServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{}), stderr: &strings.Builder{}}
	srv.cmd = exec.Command(memcachedBinary(t), args...)
	srv.cmd.Stdout, srv.cmd.Stderr = lockedWriter{srv}, lockedWriter{srv}
	if err := srv.cmd.Start(); err != nil {
		t.Fatalf("starting memcached: %v", err)
	}
	go func() {
		err := srv.cmd.Wait()
		srv.mu.Lock()
		srv.exitErr, srv.exited = err, true
		srv.mu.Unlock()
		close(srv.done)
	}()
	t.Cleanup(func() {
		_ = srv.cmd.Process.Kill()
		<-srv.done
	})
	return srv
}

// startPod starts the pod's memcached and fails the test unless it serves.
func startPod(t *testing.T, p *testPod) *realServer {
	t.Helper()
	res := startArgs(t, p.args)
	if res.exited {
		t.Fatalf("memcached %q exited at start: %s", p.args, res.srv.output())
	}
	return res.srv
}

// mcConn is a text-protocol connection, plain or TLS.
type mcConn struct {
	conn net.Conn
	rd   *bufio.Reader
}

func dialPlain(addr string) (*mcConn, error) { return dialNetwork("tcp", addr) }

func dialNetwork(network, addr string) (*mcConn, error) {
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

// dialTLS dials addr and completes the TLS handshake with cfg.
func dialTLS(addr string, cfg *tls.Config) (*mcConn, error) { return dialTLSNetwork("tcp", addr, cfg) }

func dialTLSNetwork(network, addr string, cfg *tls.Config) (*mcConn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, network, addr, cfg)
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

func newConn(c net.Conn) *mcConn {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &mcConn{conn: c, rd: bufio.NewReader(c)}
}

func (c *mcConn) Close() { _ = c.conn.Close() }

// command sends one line and reads one reply line.
func (c *mcConn) command(line string) (string, error) {
	if _, err := fmt.Fprintf(c.conn, "%s\r\n", line); err != nil {
		return "", err
	}
	return c.readLine()
}

func (c *mcConn) readLine() (string, error) {
	l, err := c.rd.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

// authenticate is memcached's ASCII authentication: a set of any key whose
// data is "user password".
func (c *mcConn) authenticate(user, password string) (string, error) {
	data := user + " " + password
	return c.command(fmt.Sprintf("set auth 0 0 %d\r\n%s", len(data), data))
}

// setGet stores a value and reads it back.
func (c *mcConn) setGet(key, value string) error {
	if r, err := c.command(fmt.Sprintf("set %s 0 0 %d\r\n%s", key, len(value), value)); err != nil || r != "STORED" {
		return fmt.Errorf("set %s: %q, %v", key, r, err)
	}
	if r, err := c.command("get " + key); err != nil || !strings.HasPrefix(r, "VALUE "+key+" ") {
		return fmt.Errorf("get %s: %q, %v", key, r, err)
	}
	if v, err := c.readLine(); err != nil || v != value {
		return fmt.Errorf("get %s: value %q, %v", key, v, err)
	}
	if end, err := c.readLine(); err != nil || end != "END" {
		return fmt.Errorf("get %s: %q instead of END, %v", key, end, err)
	}
	return nil
}

// statsSettings reads `stats settings`.
func (c *mcConn) statsSettings() (map[string]string, error) {
	if _, err := fmt.Fprint(c.conn, "stats settings\r\n"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for {
		l, err := c.readLine()
		if err != nil {
			return nil, fmt.Errorf("reading stats settings: %w (so far %v)", err, out)
		}
		if l == "END" {
			return out, nil
		}
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "STAT" {
			return nil, fmt.Errorf("stats settings: unexpected line %q", l)
		}
		out[f[1]] = strings.Join(f[2:], " ")
	}
}

// plaintextRefused: a plaintext command gets no memcached reply.
func plaintextRefused(addr string) error {
	c, err := dialPlain(addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	r, err := c.command("version")
	switch {
	case err == nil:
		return fmt.Errorf("a plaintext client got the reply %q", r)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("a plaintext connection neither was answered nor closed within 5s")
	}
	return nil
}

// realMemcached is a Memcached object of the test.
func realMemcached(spec cachev1alpha1.MemcachedSpec) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: "shop", UID: "uid-real"}, Spec: spec}
}

// resolved is resolveSettings that must succeed.
func resolved(t *testing.T, mc *cachev1alpha1.Memcached) settings {
	t.Helper()
	s, err := resolveSettings(&mc.Spec)
	if err != nil {
		t.Fatalf("resolveSettings: %v", err)
	}
	return s
}
