package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/runbook-dev/runbook/test/testenv"
)

// commandTimeout bounds every external command; a cold build of the static
// manager on a busy 2-core machine is the slowest of them.
const commandTimeout = 30 * time.Minute

func repoPath(elem ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, elem...)...)
}

// makefileVersion reads a pinned version (`NAME ?= v1.2.3`) from the Makefile,
// so the tests use exactly the tool `make tools` installs.
func makefileVersion(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(repoPath("Makefile"))
	if err != nil {
		t.Fatalf("reading the Makefile: %v", err)
	}
	defer func() { _ = f.Close() }()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\s*\?=\s*(\S+)`)
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := re.FindStringSubmatch(s.Text()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("the Makefile pins no %s", name)
	return ""
}

// pinnedTool returns bin/<name>-<version> and fails, naming the fix, when it
// is not installed.
func pinnedTool(t *testing.T, name, versionVar string) string {
	t.Helper()
	p := repoPath("bin", name+"-"+makefileVersion(t, versionVar))
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("%s is missing: run `make tools` (installs the pinned kustomize and helm into bin/)", p)
	}
	return p
}

func kustomizeBin(t *testing.T) string { return pinnedTool(t, "kustomize", "KUSTOMIZE_VERSION") }
func helmBin(t *testing.T) string      { return pinnedTool(t, "helm", "HELM_VERSION") }

func kubectlBin(t *testing.T) string {
	t.Helper()
	if err := testenv.RequireBinaries("kubectl"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(testenv.BinDir(), "kubectl")
}

// result is what a finished command printed.
type result struct {
	stdout, stderr []byte
}

// runCommand runs name with args in dir, feeding stdin when it is not nil,
// and returns the error of a non-zero exit with stderr included.
func runCommand(dir string, stdin []byte, env []string, name string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// On timeout kill the whole process group (make's and go's children too),
	// and stop waiting for pipes a leftover child might hold open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.Bytes(), stderr: errb.Bytes()}
	if err != nil {
		return r, fmt.Errorf("%s %s: %w\nstderr:\n%s\nstdout:\n%s", filepath.Base(name), strings.Join(args, " "), err, errb.Bytes(), out.Bytes())
	}
	return r, nil
}

// mustRun is runCommand in the repository root that fails the test on error.
func mustRun(t *testing.T, stdin []byte, name string, args ...string) result {
	t.Helper()
	r, err := runCommand(testenv.RepoRoot(), stdin, nil, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decodeObjects splits a multi-document YAML stream into objects, dropping
// empty documents.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// kustomizeBuild renders a kustomization directory.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	return mustRun(t, nil, kustomizeBin(t), "build", dir).stdout
}

// helmTemplate renders charts/runbook as release "runbook" in namespace ns.
func helmTemplate(t *testing.T, ns string, extra ...string) ([]byte, error) {
	t.Helper()
	args := append([]string{"template", "runbook", repoPath("charts", "runbook"), "--namespace", ns}, extra...)
	r, err := runCommand(testenv.RepoRoot(), nil, nil, helmBin(t), args...)
	return r.stdout, err
}

func mustHelmTemplate(t *testing.T, ns string, extra ...string) []byte {
	t.Helper()
	out, err := helmTemplate(t, ns, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
