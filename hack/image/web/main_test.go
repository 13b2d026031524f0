package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec // the test's own server
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServesEnvironmentAndFile: /env shows the process environment, /file
// the file as it is now (a ConfigMap volume changes under the server), and
// no request reads another path.
func TestServesEnvironmentAndFile(t *testing.T) {
	t.Setenv("DEMO_VALUE", "from-the-pod-spec")
	file := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, file) }()
	base := "http://" + ln.Addr().String()

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/env"); code != 200 || !strings.Contains(body, "\nDEMO_VALUE=from-the-pod-spec\n") {
		t.Errorf("/env: %d %q", code, body)
	}
	if code, body := get(t, base+"/file"); code != 200 || body != "first\n" {
		t.Errorf("/file: %d %q", code, body)
	}
	if err := os.WriteFile(file, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, base+"/file"); code != 200 || body != "second\n" {
		t.Errorf("/file after a change: %d %q", code, body)
	}
	if code, body := get(t, base+"/"); code != 200 || !strings.Contains(body, "DEMO_VALUE=from-the-pod-spec") || !strings.Contains(body, "second") {
		t.Errorf("/: %d %q", code, body)
	}
	for _, u := range []string{"/file?path=/etc/passwd", "/file/../../etc/passwd", "/etc/passwd"} {
		if _, body := get(t, base+u); strings.Contains(body, "root:") {
			t.Errorf("%s served /etc/passwd", u)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after its context ended: %v", err)
	}
}

func TestNoFileIsNotFound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = serve(ctx, ln, "") }()
	if code, _ := get(t, "http://"+ln.Addr().String()+"/file"); code != http.StatusNotFound {
		t.Errorf("/file without -file: %d", code)
	}
}

// TestBinaryAnswersAndStopsOnSIGTERM runs the static binary as the image
// does: it says where it listens, answers, and exits 0 on SIGTERM.
func TestBinaryAnswersAndStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "web")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DEMO_VALUE=binary")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() {
		t.Fatal("web said nothing")
	}
	_, rest, ok := strings.Cut(lines.Text(), "listening on ")
	addr, _, _ := strings.Cut(rest, ",")
	if !ok {
		t.Fatalf("web said %q", lines.Text())
	}
	exited := make(chan error, 1)
	go func() {
		for lines.Scan() {
		}
		exited <- cmd.Wait()
	}()
	if code, body := get(t, "http://"+addr+"/env"); code != 200 || !strings.Contains(body, "DEMO_VALUE=binary") {
		t.Errorf("/env: %d %q", code, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("web after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("web still runs 30s after SIGTERM")
	}
}
