package plugin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/testenv"
)

// makefileTool is bin/<name>-<version> for a tool the Makefile pins with
// versionVar.
func makefileTool(t *testing.T, name, versionVar string) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + versionVar + ` \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("no %s in the Makefile", versionVar)
	}
	p := filepath.Join(testenv.RepoRoot(), "bin", name+"-"+string(m[1]))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools`", p)
	}
	return p
}

func runCmd(t *testing.T, ctx context.Context, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestPluginKrewManifest builds the release archives and the krew manifest
// (`make plugin-dist`), checks the manifest with krew's validator, installs
// the plugin from it with krew and runs it through kubectl.
func TestPluginKrewManifest(t *testing.T) {
	// Cross-compiling five platforms with a cold build cache takes most of
	// 15 min on two cores that other test packages share (a fresh-clone CI
	// run was killed at 15 min with every archive built).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dist := t.TempDir()
	const version = "v0.0.0-e2e"
	runCmd(t, ctx, nil, "make", "-s", "plugin-dist", "PLUGIN_VERSION="+version, "PLUGIN_DIST_DIR="+dist)
	manifest := filepath.Join(dist, "runbook.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "${") || strings.Count(string(b), "sha256: ") != 5 {
		t.Fatalf("the rendered manifest has placeholders left or lacks a sha256 per platform:\n%s", b)
	}
	out := runCmd(t, ctx, nil, makefileTool(t, "validate-krew-manifest", "KREW_VERSION"), "-manifest", manifest, "-skip-install")
	if !strings.Contains(out, "structural validation OK") {
		t.Errorf("validate-krew-manifest:\n%s", out)
	}

	root := t.TempDir()
	archive := filepath.Join(dist, "kubectl-runbook_"+version+"_linux_amd64.tar.gz")
	runCmd(t, ctx, []string{"KREW_ROOT=" + root}, makefileTool(t, "krew", "KREW_VERSION"), "install", "--manifest", manifest, "--archive", archive)
	installed := filepath.Join(root, "bin", "kubectl-runbook")
	if _, err := os.Stat(installed); err != nil {
		t.Fatalf("krew did not install the plugin: %v", err)
	}
	// kubectl finds the krew-installed plugin (and only that one here).
	path := pathWith(filepath.Join(root, "bin"))
	kubectlBin := filepath.Join(testenv.BinDir(), "kubectl")
	if out := runCmd(t, ctx, []string{path}, kubectlBin, "plugin", "list"); !strings.Contains(out, installed) {
		t.Errorf("kubectl plugin list does not show %s:\n%s", installed, out)
	}
	out = runCmd(t, ctx, []string{path, "KUBECONFIG=" + suite.Kubeconfig}, kubectlBin, "runbook", "status", "-A")
	if !strings.Contains(out, "objects:") && !strings.Contains(out, "No RebootPolicy, Memcached or NSScaler found.") {
		t.Errorf("the krew-installed plugin's status -A:\n%s", out)
	}
}
