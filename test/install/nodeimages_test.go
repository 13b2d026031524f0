package install

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/runbook-dev/runbook/test/testenv"
)

// untarLayout extracts an OCI archive (a tarball of an image layout).
func untarLayout(t *testing.T, archive string) ociLayout {
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
			return ociLayout{dir: dir}
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

// TestNodeImages runs `make node-images` as the real node's setup does and
// reads what a containerd import reads: images.json's references, each
// archive's index.json naming the image by tag and by repo@digest, the
// blobs against their digests, the configs; a second run keeps everything.
func TestNodeImages(t *testing.T) {
	testenv.SkipUnderShort(t, "builds the manager and three more images")
	out := t.TempDir()
	r := mustRun(t, nil, "make", "-s", "node-images", "NODE_IMAGES_DIR="+out)
	t.Logf("make node-images:\n%s", r.stdout)
	manifest, err := os.ReadFile(filepath.Join(out, "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var images map[string]struct{ Ref, Archive string }
	if err := json.Unmarshal(manifest, &images); err != nil {
		t.Fatal(err)
	}
	debVersion, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "memcached").Output()
	if err != nil {
		t.Fatal(err)
	}
	tag := makefileVersion(t, "IMAGE_TAG")
	upstream, _, _ := strings.Cut(string(debVersion), "-")
	want := map[string]struct{ repo, tag, user string }{
		"pause":     {"runbook.local/pause", tag, "65535:65535"},
		"manager":   {"runbook.local/runbook-manager", tag, "65532:65532"},
		"memcached": {"runbook.local/memcached", upstream, "11211:11211"},
		"web":       {"runbook.local/web", tag, "65532:65532"},
		// The TLS agent beside memcached: the same non-root user as the
		// manager; memcached's files reach it by the pod's group.
		"memcached-tls-agent": {"runbook.local/runbook-memcached-tls-agent", tag, "65532:65532"},
	}
	if len(images) != len(want) {
		t.Errorf("images.json has %d images, want %d: %s", len(images), len(want), manifest)
	}
	refRE := regexp.MustCompile(`^(.+):([^:@]+)@(sha256:[0-9a-f]{64})$`)
	for name, w := range want {
		e := images[name]
		m := refRE.FindStringSubmatch(e.Ref)
		if m == nil || m[1] != w.repo || m[2] != w.tag || e.Archive != name+".oci.tar" {
			t.Errorf("%s: %+v, want %s:%s@sha256:… in %s.oci.tar", name, e, w.repo, w.tag, name)
			continue
		}
		digest := m[3]
		l := untarLayout(t, filepath.Join(out, e.Archive))
		var top ociIndex
		b, err := os.ReadFile(filepath.Join(l.dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		for _, d := range top.Manifests {
			names[d.Annotations["io.containerd.image.name"]] = d.Digest
		}
		if len(names) != 2 || names[w.repo+":"+w.tag] != digest || names[w.repo+"@"+digest] != digest {
			t.Errorf("%s: index.json names %v, want %s:%s and %s@%s, both %s", name, names, w.repo, w.tag, w.repo, digest, digest)
		}
		d := top.Manifests[0]
		if name == "manager" {
			var idx ociIndex
			l.json(t, d, &idx)
			if len(idx.Manifests) != 1 || idx.Manifests[0].Platform == nil || idx.Manifests[0].Platform.Architecture != runtime.GOARCH {
				t.Fatalf("manager: index %+v, want this machine's platform only", idx.Manifests)
			}
			d = idx.Manifests[0]
		}
		var man ociManifest
		l.json(t, d, &man)
		var cfg ociConfig
		l.json(t, man.Config, &cfg)
		files := l.files(t, man, cfg)
		if cfg.Config.User != w.user || cfg.Architecture != runtime.GOARCH {
			t.Errorf("%s: user %q arch %q, want %q %q", name, cfg.Config.User, cfg.Architecture, w.user, runtime.GOARCH)
		}
		entry := cfg.Config.Entrypoint
		if len(entry) != 1 || files[entry[0]].hdr == nil || files[entry[0]].hdr.Mode&0o111 == 0 {
			t.Errorf("%s: entrypoint %q is not an executable of the image", name, entry)
		}
		if name == "memcached" && cfg.Config.Labels["org.opencontainers.image.version"] != string(debVersion) {
			t.Errorf("memcached: version label %q, Debian's package is %s", cfg.Config.Labels["org.opencontainers.image.version"], debVersion)
		}
	}

	again := mustRun(t, nil, "make", "-s", "node-images", "NODE_IMAGES_DIR="+out)
	if n := strings.Count(string(again.stdout), "unchanged, archive kept"); n != len(want) {
		t.Errorf("a second run with the same inputs kept %d archives, want %d:\n%s", n, len(want), again.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "images.json")); string(b) != string(manifest) {
		t.Errorf("images.json changed with the same inputs:\n%s\n%s", manifest, b)
	}
}
