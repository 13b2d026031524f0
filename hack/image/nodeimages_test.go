package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func testNodeFlags(t *testing.T, out string) nodeImagesFlags {
	t.Helper()
	bins := staticBinaries(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nnot parsed\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return nodeImagesFlags{out: out, repo: "runbook.local", tag: "test", caBundle: ca,
		managerCreated: "1700000000", staticCreated: "1700000000",
		manager: bins, web: bins[:1], pause: bins[:1], tlsAgent: bins[:1]}
}

// untar extracts an OCI archive into a directory.
func untar(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q", archive, h.Name)
		}
		dst := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			err = os.MkdirAll(dst, 0o755)
		} else {
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeImagesArchivesAndManifest: images.json names the five images by
// tag and digest; each archive is an OCI layout whose index.json names the
// image both ways for `ctr images import` (io.containerd.image.name), and
// whose blobs hold the image; a second run with the same inputs keeps the
// archives, a changed input rewrites only its own.
func TestNodeImagesArchivesAndManifest(t *testing.T) {
	out := t.TempDir()
	f := testNodeFlags(t, out)
	imgs, err := buildNodeImages(f)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := writeNodeImages(out, imgs)
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]NodeImage
	b, err := os.ReadFile(filepath.Join(out, "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	refRE := regexp.MustCompile(`^(runbook\.local/[a-z-]+):([\w.-]+)@(sha256:[0-9a-f]{64})$`)
	for _, name := range []string{"pause", "manager", "memcached", "web", "memcached-tls-agent"} {
		e, ok := manifest[name]
		if !ok || e != entries[name] || e.Archive != name+".oci.tar" {
			t.Fatalf("images.json %s = %+v (written %+v)", name, e, entries[name])
		}
		m := refRE.FindStringSubmatch(e.Ref)
		if m == nil {
			t.Fatalf("%s: ref %q is not repo:tag@sha256:…", name, e.Ref)
		}
		repo, tag, digest := m[1], m[2], m[3]
		names, err := indexNames(filepath.Join(out, e.Archive))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]v1.Hash{repo + ":" + tag: {}, repo + "@" + digest: {}}
		if len(names) != len(want) {
			t.Errorf("%s: index.json names %v, want %s:%s and %s@%s", name, names, repo, tag, repo, digest)
		}
		for n := range want {
			if names[n].String() != digest {
				t.Errorf("%s: index.json names %q → %s, want %s", name, n, names[n], digest)
			}
		}
		// The layout reads back and holds the image (or index) of that digest.
		p, err := layout.FromPath(untar(t, filepath.Join(out, e.Archive)))
		if err != nil {
			t.Fatal(err)
		}
		h, _ := v1.NewHash(digest)
		if name == "manager" {
			idx, err := p.ImageIndex()
			if err == nil {
				_, err = idx.ImageIndex(h)
			}
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		} else if img, err := p.Image(h); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if d, _ := img.Digest(); d != h {
			t.Errorf("%s: image digest %s, ref %s", name, d, digest)
		} else if _, err := img.RawConfigFile(); err != nil {
			t.Errorf("%s: config: %v", name, err)
		}
		t.Logf("%s %s", name, e.Ref)
	}

	stat := func(name string) os.FileInfo {
		st, err := os.Stat(filepath.Join(out, name+".oci.tar"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := map[string]os.FileInfo{}
	for _, n := range []string{"pause", "manager", "memcached", "web"} {
		before[n] = stat(n)
		// Mark each archive, so a rewrite shows whatever the clock's resolution.
		if err := os.Chtimes(filepath.Join(out, n+".oci.tar"), before[n].ModTime(), before[n].ModTime().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		before[n] = stat(n)
	}
	// The web binary changes: only the web archive is written again.
	f.web = f.manager[1:]
	imgs, err = buildNodeImages(f)
	if err != nil {
		t.Fatal(err)
	}
	again, err := writeNodeImages(out, imgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pause", "manager", "memcached", "web"} {
		rewritten := !stat(n).ModTime().Equal(before[n].ModTime())
		changed := again[n] != entries[n]
		if rewritten != (n == "web") || changed != (n == "web") {
			t.Errorf("%s: rewritten %v, ref changed %v (%s → %s)", n, rewritten, changed, entries[n].Ref, again[n].Ref)
		}
	}
}
