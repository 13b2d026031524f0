package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// ociDescriptor, ociIndex, ociManifest and ociConfig are the parts of the
// OCI image spec the test reads. They are decoded here with the standard
// library, independently of the go-containerregistry code that wrote them.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ociLayout reads blobs of an OCI image layout directory, checking each
// blob against its digest.
type ociLayout struct{ dir string }

func (l ociLayout) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: content does not match its descriptor (size %d, want %d)", d.Digest, len(b), d.Size)
	}
	return b
}

func (l ociLayout) json(t *testing.T, d ociDescriptor, v any) {
	t.Helper()
	if err := json.Unmarshal(l.blob(t, d), v); err != nil {
		t.Fatalf("blob %s: %v", d.Digest, err)
	}
}

// layerEntry is a file of a layer with its content.
type layerEntry struct {
	hdr  *tar.Header
	data []byte
}

// files unpacks the image's layers in order (a later layer's entry wins) and
// checks every layer's uncompressed digest against the config's diff_ids.
func (l ociLayout) files(t *testing.T, m ociManifest, cfg ociConfig) map[string]layerEntry {
	t.Helper()
	if len(m.Layers) != len(cfg.RootFS.DiffIDs) {
		t.Fatalf("%d layers but %d diff_ids", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	out := map[string]layerEntry{}
	for i, d := range m.Layers {
		if d.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Fatalf("layer %d media type %q", i, d.MediaType)
		}
		zr, err := gzip.NewReader(bytes.NewReader(l.blob(t, d)))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != cfg.RootFS.DiffIDs[i] {
			t.Fatalf("layer %d: uncompressed digest differs from diff_id %s", i, cfg.RootFS.DiffIDs[i])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out["/"+strings.TrimSuffix(h.Name, "/")] = layerEntry{hdr: h, data: data}
		}
	}
	return out
}

// TestImage builds the image the way a user does (`make image`, no
// container engine), inspects every platform's image from the OCI layout,
// and runs the manager binary taken out of the amd64 image's layer against
// the local cluster until it is ready and reconciles.
func TestImage(t *testing.T) {
	testenv.SkipUnderShort(t, "a kwok cluster and two cross-compiled builds")
	out := t.TempDir()
	img := makefileVersion(t, "IMAGE_REPO") + ":" + makefileVersion(t, "IMAGE_TAG")
	r := mustRun(t, nil, "make", "-s", "image", "IMAGE_DIR="+out)
	t.Logf("make image:\n%s", r.stdout)

	l := ociLayout{dir: filepath.Join(out, "oci")}
	var top ociIndex
	b, err := os.ReadFile(filepath.Join(l.dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if layoutFile, err := os.ReadFile(filepath.Join(l.dir, "oci-layout")); err != nil || !strings.Contains(string(layoutFile), `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout: %q, %v", layoutFile, err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json should name one image index, has %+v", top.Manifests)
	}
	if got := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != img {
		t.Errorf("the index is named %q, want the deploy default %q", got, img)
	}
	digest := top.Manifests[0].Digest
	if !strings.Contains(string(r.stdout), digest) {
		t.Errorf("make image does not print the index digest %s", digest)
	}

	var idx ociIndex
	l.json(t, top.Manifests[0], &idx)
	var platforms []string
	binaries := map[string][]byte{}
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		platforms = append(platforms, p)
		var m ociManifest
		l.json(t, d, &m)
		var cfg ociConfig
		l.json(t, m.Config, &cfg)
		if cfg.OS+"/"+cfg.Architecture != p {
			t.Errorf("%s: config says %s/%s", p, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532 (non-root)", p, cfg.Config.User)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [/manager] and none", p, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		files := l.files(t, m, cfg)
		checkImageFiles(t, p, files)
		binaries[p] = files["/manager"].data
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	for p, machine := range map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64} {
		f, err := elf.NewFile(bytes.NewReader(binaries[p]))
		if err != nil {
			t.Fatalf("%s: /manager: %v", p, err)
		}
		if f.Machine != machine {
			t.Errorf("%s: /manager is built for %s", p, f.Machine)
		}
	}

	// The oci-archive is the same layout in one file.
	checkArchive(t, filepath.Join(out, "runbook-manager.oci.tar"), digest)

	// Same build as `make build-static`: the amd64 binary in the image is
	// byte for byte the one build-static writes.
	static := t.TempDir()
	mustRun(t, nil, "make", "-s", "build-static", "BIN="+static)
	want, err := os.ReadFile(filepath.Join(static, "manager-static"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(binaries["linux/amd64"], want) {
		t.Errorf("the image's amd64 /manager (%d bytes) differs from `make build-static` (%d bytes): the builds' flags diverged", len(binaries["linux/amd64"]), len(want))
	}

	runImageBinary(t, binaries["linux/amd64"])
}

// checkImageFiles: the files of one platform's image are exactly the static
// manager and what a non-root process needs, and nothing that runs a shell.
func checkImageFiles(t *testing.T, p string, files map[string]layerEntry) {
	t.Helper()
	var executables []string
	for name, e := range files {
		if e.hdr.Typeflag == tar.TypeReg && e.hdr.Mode&0o111 != 0 {
			executables = append(executables, name)
		}
		if base := filepath.Base(name); slices.Contains([]string{"sh", "bash", "ash", "dash", "busybox"}, base) {
			t.Errorf("%s: the image contains a shell: %s", p, name)
		}
		if e.hdr.Typeflag == tar.TypeSymlink || e.hdr.Typeflag == tar.TypeLink {
			t.Errorf("%s: unexpected link %s -> %s", p, name, e.hdr.Linkname)
		}
	}
	if !slices.Equal(executables, []string{"/manager"}) {
		t.Errorf("%s: executables %v, want only /manager", p, executables)
	}
	if m := files["/manager"]; m.hdr == nil || m.hdr.Uid != 0 || m.hdr.Mode&0o022 != 0 {
		t.Errorf("%s: /manager must exist, belong to root and not be writable by the user: %+v", p, m.hdr)
	}
	if f, err := elf.NewFile(bytes.NewReader(files["/manager"].data)); err == nil {
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s: /manager needs a dynamic loader", p)
			}
		}
	}
	if !strings.Contains(string(files["/etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd lacks the nonroot user 65532:\n%s", p, files["/etc/passwd"].data)
	}
	if !strings.Contains(string(files["/etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("%s: /etc/group lacks nonroot", p)
	}
	if h := files["/home/nonroot"].hdr; h == nil || h.Typeflag != tar.TypeDir || h.Uid != 65532 {
		t.Errorf("%s: /home/nonroot is not a directory of 65532: %+v", p, h)
	}
	if h := files["/tmp"].hdr; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o1777 != 0o1777 {
		t.Errorf("%s: /tmp is not a sticky world-writable directory: %+v", p, h)
	}
	pool := x509.NewCertPool()
	if ca := files["/etc/ssl/certs/ca-certificates.crt"].data; !pool.AppendCertsFromPEM(ca) {
		t.Errorf("%s: /etc/ssl/certs/ca-certificates.crt holds no certificate (%d bytes)", p, len(ca))
	}
}

func checkArchive(t *testing.T, path, digest string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"index.json", "oci-layout", "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")} {
		if !slices.Contains(names, want) {
			t.Errorf("%s lacks %s", path, want)
		}
	}
}

// runImageBinary starts the binary from the image layer against a local
// cluster as the manager would run in the pod, waits for /readyz, and for a
// Memcached to be reconciled (status for its generation, a Deployment).
func runImageBinary(t *testing.T, binary []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, NamePrefix: "runbook-image"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", repoPath("config", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitCRDsEstablished(ctx, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		t.Fatal(err)
	}
	m, err := cluster.StartManager(ctx, bin, c.Kubeconfig, "--operator-namespace", "runbook-system")
	if err != nil {
		t.Fatalf("the image's manager did not become ready: %v", err)
	}
	defer func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager stop: %v", err)
		}
		m.DumpLogsOnFailure(t.Failed())
	}()
	manifest := filepath.Join(t.TempDir(), "memcached.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: cache.runbook.dev/v1alpha1\nkind: Memcached\nmetadata: {name: from-image, namespace: default}\nspec: {size: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", manifest); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"wait", "--for=jsonpath={.status.observedGeneration}=1", "memcached/from-image", "-n", "default", "--timeout=120s"},
		{"wait", "--for=create", "deployment/from-image", "-n", "default", "--timeout=60s"},
	} {
		if _, err := c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("the image's manager does not reconcile: %v", err)
		}
	}
	t.Logf("the image's manager (pid %d) is ready and reconciles", m.Pid())
}

// TestDeployDefaultsToTheImage: `make image` names the image IMG, and
// `make deploy` (config/manager) and the Helm chart default to that name.
func TestDeployDefaultsToTheImage(t *testing.T) {
	img := makefileVersion(t, "IMAGE_REPO") + ":" + makefileVersion(t, "IMAGE_TAG")
	if got := makefileVersion(t, "IMG"); got != "$(IMAGE_REPO):$(IMAGE_TAG)" {
		t.Errorf("IMG ?= %s, want $(IMAGE_REPO):$(IMAGE_TAG)", got)
	}
	kust := objectSet(decodeObjects(t, kustomizeBuild(t, repoPath("config", "default"))))
	chart := objectSet(decodeObjects(t, mustHelmTemplate(t, helmNamespace)))
	for name, objs := range map[string]objectSet{"config/default": kust, "charts/runbook": chart} {
		d := objs.one(t, "Deployment")
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("%s: %d containers", name, len(containers))
		}
		if got := containers[0].(map[string]any)["image"]; got != img {
			t.Errorf("%s: manager image %v, want %s (what `make image` builds)", name, got, img)
		}
	}
}
