package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The annotations of index.json that name an image on import: containerd
// (ctr images import) reads the first, OCI tools the second.
const (
	containerdImageName = "io.containerd.image.name"
	ociRefName          = "org.opencontainers.image.ref.name"
	manifestFile        = "images.json"
)

// NodeImage is one entry of images.json: the reference pods use, with the
// digest, and the OCI archive that carries it.
type NodeImage struct {
	Ref     string `json:"ref"`
	Archive string `json:"archive"`
}

// nodeImage is an image (or, for the manager, an index) to write.
type nodeImage struct {
	name    string // key of images.json and file name of the archive
	repo    string // e.g. runbook.local/memcached
	tag     string
	created time.Time
	image   v1.Image
	index   v1.ImageIndex
	summary string
}

func (n *nodeImage) digest() (v1.Hash, error) {
	if n.index != nil {
		return n.index.Digest()
	}
	return n.image.Digest()
}

func (n *nodeImage) ref() (string, error) {
	d, err := n.digest()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%s@%s", n.repo, n.tag, d), nil
}

// nodeImagesFlags are the inputs of `go run . node-images`.
type nodeImagesFlags struct {
	out, repo, tag, revision, buildFlags, caBundle string
	managerCreated, staticCreated                  string
	manager, web, pause, tlsAgent                  binaryFlags
}

func nodeImagesMain(args []string) error {
	var f nodeImagesFlags
	fs := flag.NewFlagSet("node-images", flag.ContinueOnError)
	fs.StringVar(&f.out, "out", "", "output directory: <name>.oci.tar for each image and images.json")
	fs.StringVar(&f.repo, "repo", "runbook.local", "repository prefix of the images' names (nothing pulls from it)")
	fs.StringVar(&f.tag, "tag", "v0.1.0", "tag of the images built from this repository (manager, web, pause); memcached is tagged with its upstream version")
	fs.StringVar(&f.revision, "revision", "", "source revision recorded in the manager's org.opencontainers.image.revision label")
	fs.StringVar(&f.buildFlags, "build-flags", `-trimpath -tags grpcnotrace -ldflags="-s -w"`, "the go build flags of the binaries, recorded in the images' history")
	fs.StringVar(&f.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the manager image's CA bundle")
	fs.StringVar(&f.managerCreated, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time of the manager image, Unix seconds")
	fs.StringVar(&f.staticCreated, "static-created", "0", "creation time of the web and pause images, Unix seconds (the last commit of their sources keeps their digests stable across other commits)")
	fs.Var(&f.manager, "manager", "os/arch=path of the manager binary; repeat per platform")
	fs.Var(&f.web, "web", "os/arch=path of the web binary (one platform)")
	fs.Var(&f.pause, "pause", "os/arch=path of the pause binary (one platform)")
	fs.Var(&f.tlsAgent, "tls-agent", "os/arch=path of the memcached TLS agent binary (one platform; optional)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.out == "" || len(f.manager) == 0 || len(f.web) != 1 || len(f.pause) != 1 || len(f.tlsAgent) > 1 {
		return errors.New("node-images: -out, at least one -manager, one -web and one -pause are required")
	}
	start := time.Now()
	imgs, err := buildNodeImages(f)
	if err != nil {
		return err
	}
	entries, err := writeNodeImages(f.out, imgs)
	if err != nil {
		return err
	}
	for _, n := range imgs {
		fmt.Printf("%-9s %s\n          %s\n", n.name, entries[n.name].Ref, n.summary)
	}
	fmt.Printf("wrote %s in %s\n", filepath.Join(f.out, manifestFile), time.Since(start).Round(time.Millisecond))
	return nil
}

func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	var sec int64
	if _, err := fmt.Sscan(s, &sec); err != nil {
		return time.Time{}, fmt.Errorf("%q: want Unix seconds: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// buildNodeImages builds the four images in memory.
func buildNodeImages(f nodeImagesFlags) ([]*nodeImage, error) {
	managerCreated, err := parseEpoch(f.managerCreated)
	if err != nil {
		return nil, err
	}
	staticCreated, err := parseEpoch(f.staticCreated)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(f.caBundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	managerRepo := f.repo + "/" + imageTitle
	spec := Spec{Name: managerRepo + ":" + f.tag, Created: managerCreated, Revision: f.revision, CABundle: ca, Binaries: f.manager, BuildFlags: f.buildFlags}
	idx, err := Build(spec)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	web, err := buildStatic(webProgram, f.web[0], staticCreated, f.buildFlags)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	pause, err := buildStatic(pauseProgram, f.pause[0], staticCreated, f.buildFlags)
	if err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	mc, err := buildMemcached("/")
	if err != nil {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	imgs := []*nodeImage{
		{name: "pause", repo: f.repo + "/pause", tag: f.tag, created: staticCreated, image: pause, summary: "static pause binary"},
		{name: "manager", repo: managerRepo, tag: f.tag, created: managerCreated, index: idx, summary: fmt.Sprintf("index of %d platform(s)", len(f.manager))},
		{name: "memcached", repo: f.repo + "/memcached", tag: mc.Tag, created: mc.created(), image: mc.Image, summary: "Debian " + strings.Join(mc.Packages, " ")},
		{name: "web", repo: f.repo + "/web", tag: f.tag, created: staticCreated, image: web, summary: "static demo web server"},
	}
	if len(f.tlsAgent) == 1 {
		agent, err := buildStatic(tlsAgentProgram, f.tlsAgent[0], staticCreated, f.buildFlags)
		if err != nil {
			return nil, fmt.Errorf("memcached-tls-agent: %w", err)
		}
		imgs = append(imgs, &nodeImage{name: "memcached-tls-agent", repo: f.repo + "/runbook-memcached-tls-agent", tag: f.tag,
			created: staticCreated, image: agent, summary: "static memcached TLS agent"})
	}
	return imgs, nil
}

func (m *MemcachedImage) created() time.Time {
	cfg, err := m.Image.ConfigFile()
	if err != nil {
		return time.Unix(0, 0).UTC()
	}
	return cfg.Created.Time
}

// writeNodeImages writes each image's archive (unless images.json already
// names the same digest and the archive is there: same inputs, same
// bytes) and then images.json.
func writeNodeImages(out string, imgs []*nodeImage) (map[string]NodeImage, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	previous := readManifest(filepath.Join(out, manifestFile))
	entries := map[string]NodeImage{}
	for _, n := range imgs {
		ref, err := n.ref()
		if err != nil {
			return nil, err
		}
		e := NodeImage{Ref: ref, Archive: n.name + ".oci.tar"}
		entries[n.name] = e
		if previous[n.name] == e && archiveNames(filepath.Join(out, e.Archive), n) {
			n.summary += "; unchanged, archive kept"
			continue
		}
		size, err := writeArchive(n, filepath.Join(out, e.Archive))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.name, err)
		}
		n.summary += fmt.Sprintf("; wrote %s (%d bytes)", e.Archive, size)
	}
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(out, manifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return entries, os.Rename(tmp, filepath.Join(out, manifestFile))
}

func readManifest(p string) map[string]NodeImage {
	var m map[string]NodeImage
	b, err := os.ReadFile(p)
	if err == nil && json.Unmarshal(b, &m) == nil {
		return m
	}
	return nil
}

// writeArchive writes n as an OCI layout tarball whose index.json names it
// twice, by tag and by digest: `ctr images import` creates one containerd
// image per name, and the CRI finds a pod's name:tag@digest reference by
// its repo@digest name.
func writeArchive(n *nodeImage, dst string) (int64, error) {
	dir, err := os.MkdirTemp(filepath.Dir(dst), "."+n.name+"-oci-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return 0, err
	}
	d, err := n.digest()
	if err != nil {
		return 0, err
	}
	for _, name := range []string{n.repo + ":" + n.tag, n.repo + "@" + d.String()} {
		opt := layout.WithAnnotations(map[string]string{containerdImageName: name, ociRefName: name})
		if n.index != nil {
			err = p.AppendIndex(n.index, opt)
		} else {
			err = p.AppendImage(n.image, opt)
		}
		if err != nil {
			return 0, err
		}
	}
	tmp := dst + ".tmp"
	size, err := tarDir(dir, tmp, n.created)
	if err != nil {
		return 0, err
	}
	return size, os.Rename(tmp, dst)
}

// archiveNames: the archive is there and names n by tag and by digest.
func archiveNames(archive string, n *nodeImage) bool {
	d, err := n.digest()
	if err != nil {
		return false
	}
	names, err := indexNames(archive)
	return err == nil && names[n.repo+":"+n.tag] == d && names[n.repo+"@"+d.String()] == d
}

// indexNames returns the containerd image names of an OCI archive's
// index.json, with the digest each names.
func indexNames(archive string) (map[string]v1.Hash, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s has no index.json", archive)
		}
		if err != nil {
			return nil, err
		}
		if h.Name != "index.json" {
			continue
		}
		var idx v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return nil, err
		}
		out := map[string]v1.Hash{}
		for _, m := range idx.Manifests {
			out[m.Annotations[containerdImageName]] = m.Digest
		}
		return out, nil
	}
}
