package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts. The user is distroless's "nonroot", so the
// manifests and docs written for the distroless base stay true.
const (
	nonRootUID     = 65532
	managerPath    = "/manager"
	caBundlePath   = "/etc/ssl/certs/ca-certificates.crt"
	sourceURL      = "https://github.com/runbook-dev/runbook"
	imageTitle     = "runbook-manager"
	imageDescribed = "Runbook operator manager: RebootPolicy, Memcached and NSScaler controllers"
)

// platformBinary is the manager built for one platform.
type platformBinary struct {
	OS, Arch, Path string
}

func (p platformBinary) platform() string { return p.OS + "/" + p.Arch }

// Spec is everything an image build is made of.
type Spec struct {
	Name     string
	Created  time.Time
	Revision string
	CABundle []byte
	Binaries []platformBinary
	// BuildFlags are the go build flags of the binaries, recorded in the
	// manager layer's history.
	BuildFlags string
}

// Build returns the OCI image index with one image per binary. Each image
// has two layers: the base (passwd, group, nsswitch.conf, CA bundle, /tmp,
// the non-root home) and the manager binary.
func Build(s Spec) (v1.ImageIndex, error) {
	base, err := layerOf(baseFiles(s.CABundle), s.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, b := range s.Binaries {
		if seen[b.platform()] {
			return nil, fmt.Errorf("platform %s given twice", b.platform())
		}
		seen[b.platform()] = true
		img, err := platformImage(s, base, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.platform(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform:    &v1.Platform{OS: b.OS, Architecture: b.Arch, Variant: variant(b.Arch)},
				Annotations: map[string]string{"org.opencontainers.image.ref.name": s.Name},
			},
		})
	}
	return idx, nil
}

// variant is the conventional CPU variant of an architecture (arm64 images
// are linux/arm64/v8 in the registries' indexes).
func variant(arch string) string {
	if arch == "arm64" {
		return "v8"
	}
	return ""
}

func platformImage(s Spec, base v1.Layer, b platformBinary) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	if err := checkStaticELF(bin, b.Arch); err != nil {
		return nil, fmt.Errorf("%s: %w", b.Path, err)
	}
	manager, err := layerOf([]file{{name: managerPath, mode: 0o755, data: bin}}, s.Created)
	if err != nil {
		return nil, fmt.Errorf("manager layer: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.source":      sourceURL,
		"org.opencontainers.image.title":       imageTitle,
		"org.opencontainers.image.description": imageDescribed,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if s.Revision != "" {
		labels["org.opencontainers.image.revision"] = s.Revision
	}
	return assemble(b.OS, b.Arch, s.Created, []layerPart{
		{layer: base, createdBy: "hack/image: passwd, group, nsswitch.conf, CA certificates, /tmp, /home/nonroot", comment: "base"},
		{layer: manager, createdBy: "hack/image: " + managerPath + " (CGO_ENABLED=0 go build " + s.BuildFlags + " ./cmd)", comment: "manager"},
	}, v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRootUID, nonRootUID),
		Entrypoint: []string{managerPath},
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=" + caBundlePath},
		Labels:     labels,
	})
}

// layerPart is one layer of an image with the history entry that says
// where it came from.
type layerPart struct {
	layer              v1.Layer
	createdBy, comment string
}

// assemble is the one way every image of this module is made: OCI media
// types, the layers in order with their history, the platform and the
// runtime config.
func assemble(osName, arch string, created time.Time, parts []layerPart, config v1.Config) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(parts))
	for _, p := range parts {
		adds = append(adds, mutate.Addendum{Layer: p.layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: p.createdBy, Comment: p.comment}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = osName, arch, variant(arch)
	cfg.Created = v1.Time{Time: created}
	cfg.Config = config
	return mutate.ConfigFile(img, cfg)
}

// file is one entry of a layer: a regular file, a directory when dir is
// set, or a symbolic link to link.
type file struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	link     string
	data     []byte
}

// baseFiles is what distroless/static:nonroot provides that the manager
// uses: the user database (so the numeric user has a name and a home), the
// resolver order, the trust store and a writable /tmp.
func baseFiles(ca []byte) []file {
	return []file{
		{name: "/etc", mode: 0o755, dir: true},
		{name: "/etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootUID, nonRootUID))},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\n" + fmt.Sprintf("nonroot:x:%d:\n", nonRootUID))},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/etc/ssl", mode: 0o755, dir: true},
		{name: "/etc/ssl/certs", mode: 0o755, dir: true},
		{name: caBundlePath, mode: 0o644, data: ca},
		{name: "/home", mode: 0o755, dir: true},
		{name: "/home/nonroot", mode: 0o700, uid: nonRootUID, gid: nonRootUID, dir: true},
		{name: "/root", mode: 0o700, dir: true},
		{name: "/tmp", mode: 0o1777, dir: true},
	}
}

// layerOf writes files into an uncompressed tar (paths relative, as image
// layers have them; every time set to mtime, so the layer is reproducible)
// and returns it as a gzip-compressed OCI layer.
func layerOf(files []file, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    path.Clean(f.name)[1:],
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
