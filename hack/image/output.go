package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// checkStaticELF refuses a binary that is not a static ELF executable for
// arch: an image without a libc or dynamic loader could not start it.
func checkStaticELF(bin []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if want == elf.EM_NONE {
		return fmt.Errorf("unsupported architecture %q (amd64, arm64)", arch)
	}
	if f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (needs a dynamic loader): build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// ManifestResult is one platform's image in the index.
type ManifestResult struct {
	Platform       string
	Digest         v1.Hash
	CompressedSize int64
}

// Result is what WriteOutputs wrote.
type Result struct {
	Digest      v1.Hash
	LayoutDir   string
	Archive     string
	ArchiveSize int64
	Manifests   []ManifestResult
}

// WriteOutputs writes the index as an OCI image layout (out/oci, replacing
// any earlier one) and as a tarball of that layout, out/<title>.oci.tar,
// which `skopeo copy oci-archive:...`, `crane push` or `ctr import` take.
func WriteOutputs(idx v1.ImageIndex, s Spec, out string) (*Result, error) {
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": s.Name})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	res := &Result{LayoutDir: dir, Archive: filepath.Join(out, imageTitle+".oci.tar")}
	if res.Digest, err = idx.Digest(); err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		var size int64
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				return nil, err
			}
			size += n
		}
		res.Manifests = append(res.Manifests, ManifestResult{Platform: d.Platform.String(), Digest: d.Digest, CompressedSize: size})
	}
	if res.ArchiveSize, err = tarDir(dir, res.Archive, s.Created); err != nil {
		return nil, fmt.Errorf("writing %s: %w", res.Archive, err)
	}
	return res, nil
}

// tarDir writes the files under dir into a tar at dst in name order with
// fixed times, so the same layout always gives the same archive.
func tarDir(dir, dst string, mtime time.Time) (int64, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return 0, err
	}
	sort.Strings(names)
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		st, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		h := &tar.Header{Name: rel, ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size(), Format: tar.FormatPAX}
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = rel+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return 0, err
		}
		if !st.IsDir() {
			if err := copyFile(tw, p); err != nil {
				return 0, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(w, f)
	return err
}

// Push uploads the index and its images to the registry of ref, with the
// credentials `docker login` (or `crane auth login`) stored.
func Push(idx v1.ImageIndex, ref string, opts ...remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("-name %q is not an image reference: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
