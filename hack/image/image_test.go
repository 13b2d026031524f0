package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// staticBinaries builds a tiny static program for amd64 and arm64: the
// builder's checks and layers are the same whatever the binary does.
func staticBinaries(t *testing.T) []platformBinary {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var bins []platformBinary
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, "hello-"+arch)
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w", "-o", out, src) // the Makefile's STATIC_BUILD_FLAGS
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", arch, err, b)
		}
		bins = append(bins, platformBinary{OS: "linux", Arch: arch, Path: out})
	}
	return bins
}

func testSpec(bins []platformBinary) Spec {
	return Spec{
		Name:     "registry.example/runbook-manager:test",
		Created:  time.Unix(1700000000, 0).UTC(),
		Revision: "abc123",
		CABundle: []byte("-----BEGIN CERTIFICATE-----\nnot parsed by the builder\n-----END CERTIFICATE-----\n"),
		Binaries: bins,
	}
}

func TestBuildIsReproducibleAndWritesALayout(t *testing.T) {
	spec := testSpec(staticBinaries(t))
	a, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds of the same inputs differ: %s and %s", da, db)
	}

	out := t.TempDir()
	res, err := WriteOutputs(a, spec, out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != da || len(res.Manifests) != 2 {
		t.Fatalf("result %+v, want digest %s and two manifests", res, da)
	}
	// The layout reads back as the same index, tagged with the name.
	p, err := layout.FromPath(res.LayoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != da || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != spec.Name {
		t.Fatalf("index.json = %+v, want one entry %s named %s", tm.Manifests, da, spec.Name)
	}
	// The archive holds the layout's files, index.json and oci-layout first
	// among the blobs' siblings.
	f, err := os.Open(res.Archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
	}
	for _, want := range []string{"index.json", "oci-layout", "blobs/sha256/" + da.Hex} {
		if !names[want] {
			t.Errorf("%s lacks %s (has %v)", res.Archive, want, names)
		}
	}
}

func TestImageConfigAndLayers(t *testing.T) {
	spec := testSpec(staticBinaries(t))
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	platforms := []string{}
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/manager" || cfg.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config %+v", d.Platform, cfg.Config)
		}
		files := layerFiles(t, img)
		if got := files["manager"]; got == nil || got.Mode&0o111 == 0 {
			t.Errorf("%s: /manager missing or not executable: %+v", d.Platform, got)
		}
		if got := files["home/nonroot/"]; got == nil || got.Uid != 65532 {
			t.Errorf("%s: /home/nonroot not owned by 65532: %+v", d.Platform, got)
		}
		if got := files["tmp/"]; got == nil || got.Mode&0o1777 != 0o1777 {
			t.Errorf("%s: /tmp not world-writable and sticky: %+v", d.Platform, got)
		}
		for n := range files {
			if strings.HasPrefix(n, "bin/") || strings.HasSuffix(n, "/sh") || n == "sh" {
				t.Errorf("%s: the image has %s", d.Platform, n)
			}
		}
	}
	if strings.Join(platforms, ",") != "linux/amd64,linux/arm64/v8" {
		t.Errorf("platforms %v", platforms)
	}
}

func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = h
		}
		_ = rc.Close()
	}
	return out
}

func TestRefusesWhatCannotRun(t *testing.T) {
	bins := staticBinaries(t)
	for name, b := range map[string][]platformBinary{
		"a dynamically linked binary": {{OS: "linux", Arch: "amd64", Path: "/bin/ls"}},
		"a binary of another arch":    {{OS: "linux", Arch: "amd64", Path: bins[1].Path}},
		"an unsupported arch":         {{OS: "linux", Arch: "riscv64", Path: bins[0].Path}},
		"a platform twice":            {bins[0], bins[0]},
	} {
		if _, err := Build(testSpec(b)); err == nil {
			t.Errorf("%s was accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestPushToARegistry pushes to an in-process registry (the registry
// protocol, over HTTP) and pulls the index back by its tag.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(staticBinaries(t))
	spec.Name = u.Host + "/runbook-manager:test"
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(idx, spec.Name); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	got, _ := pulled.Digest()
	if got != want {
		t.Fatalf("pulled %s, pushed %s", got, want)
	}
	arm, err := pulled.Image(mustManifest(t, pulled, "arm64").Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fileContent(t, arm, "manager"), mustRead(t, bins(spec, "arm64"))) {
		t.Fatal("the pulled arm64 image's /manager is not the arm64 binary")
	}
}

// fileContent reads one file out of an image's layers.
func fileContent(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == path {
				b, err := io.ReadAll(tr)
				_ = rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		_ = rc.Close()
	}
	t.Fatalf("no %s in the image", path)
	return nil
}

func mustManifest(t *testing.T, idx v1.ImageIndex, arch string) v1.Descriptor {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform.Architecture == arch {
			return d
		}
	}
	t.Fatalf("no %s manifest", arch)
	return v1.Descriptor{}
}

func bins(s Spec, arch string) string {
	for _, b := range s.Binaries {
		if b.Arch == arch {
			return b.Path
		}
	}
	return ""
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
