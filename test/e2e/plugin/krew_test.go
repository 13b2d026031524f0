package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

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

// TestPluginKrewManifest builds the host's release archive and its krew
// manifest (`make plugin-dist` for the host platform only: the other
// platforms' archives are a release's, built by `make plugin-dist`, not by
// the tests), checks the manifest with krew's validator, installs the plugin
// from it with krew and runs it through kubectl.
func TestPluginKrewManifest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dist := t.TempDir()
	const version = "v0.0.0-e2e"
	host := runtime.GOOS + "/" + runtime.GOARCH
	runCmd(t, ctx, nil, "make", "-s", "plugin-dist", "PLUGIN_VERSION="+version, "PLUGIN_DIST_DIR="+dist, "PLUGIN_PLATFORMS="+host)
	archive := filepath.Join(dist, "kubectl-runbook_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	if built, _ := filepath.Glob(filepath.Join(dist, "*.tar.gz")); len(built) != 1 || built[0] != archive {
		t.Fatalf("archives built: %v, want only %s", built, archive)
	}
	manifest := filepath.Join(dist, "runbook.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "${") || strings.Count(string(b), "sha256: ") != 1 ||
		!strings.Contains(string(b), fmt.Sprintf("sha256: %x\n", sha256.Sum256(tarball))) {
		t.Fatalf("the rendered manifest has placeholders left, or not exactly the host archive's sha256:\n%s", b)
	}
	out := runCmd(t, ctx, nil, makefileTool(t, "validate-krew-manifest", "KREW_VERSION"), "-manifest", manifest, "-skip-install")
	if !strings.Contains(out, "structural validation OK") {
		t.Errorf("validate-krew-manifest:\n%s", out)
	}

	root := t.TempDir()
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

// TestKrewTemplateNamesEveryArchive: the platforms the tests do not build
// are still checked for what dist.sh relies on — each entry of the manifest
// template names the archive `make plugin-dist` writes for its platform, the
// placeholder of that archive's sha256, and the binary in it.
func TestKrewTemplateNamesEveryArchive(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "krew", "runbook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		Spec struct {
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &plugin); err != nil {
		t.Fatal(err)
	}
	if len(plugin.Spec.Platforms) < 2 {
		t.Fatalf("positive control: the template lists %d platforms", len(plugin.Spec.Platforms))
	}
	for _, p := range plugin.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		bin := "kubectl-runbook"
		if goos == "windows" {
			bin += ".exe"
		}
		wantURI := "https://github.com/runbook-dev/runbook/releases/download/${VERSION}/kubectl-runbook_${VERSION}_" + goos + "_" + arch + ".tar.gz"
		if len(p.Selector.MatchLabels) != 2 || p.URI != wantURI || p.SHA256 != "${SHA256_"+goos+"_"+arch+"}" || p.Bin != bin {
			t.Errorf("platform %s/%s: uri %q, sha256 %q, bin %q; want %q, ${SHA256_%s_%s}, %q", goos, arch, p.URI, p.SHA256, p.Bin, wantURI, goos, arch, bin)
		}
	}
}
