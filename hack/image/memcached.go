package main

import (
	"fmt"
	"path"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The memcached image's fixed facts. The user is the one the operator's
// pods run as (runAsUser 11211, like the official memcached image).
const (
	memcacheUID       = 11211
	memcachedProgram  = "/usr/bin/memcached"
	memcachedPackage  = "memcached"
	debianPackagesKey = "dev.runbook.debian.packages"
)

// MemcachedImage is memcached as Debian ships it, with exactly the files it
// needs to run: its binary, the dynamic loader and the shared libraries it
// links (transitively), each package's copyright file, and a user database
// with the memcache user. No shell, no package manager.
type MemcachedImage struct {
	Image   v1.Image
	Version string // the Debian version of the memcached package, e.g. 1.6.18-1+deb12u1
	Tag     string // its upstream part, e.g. 1.6.18
	// Packages lists name=version of every package a file comes from.
	Packages []string
}

// buildMemcached assembles the image from the packages installed under
// root ("/" but for tests).
func buildMemcached(root string) (*MemcachedImage, error) {
	db, err := loadDpkgDB(root)
	if err != nil {
		return nil, err
	}
	version := db.version(memcachedPackage)
	if version == "" {
		return nil, fmt.Errorf("the Debian package memcached is not installed (apt-get install memcached)")
	}
	c, err := resolveProgram(db, memcachedProgram)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", memcachedProgram, err)
	}
	if err := c.addCopyright(); err != nil {
		return nil, err
	}
	created := c.newest()
	base, err := layerOf(memcachedBaseFiles(), created)
	if err != nil {
		return nil, err
	}
	parts := []layerPart{{layer: base, comment: "base", createdBy: "hack/image: passwd, group, nsswitch.conf with the memcache user " + fmt.Sprint(memcacheUID) + ", /tmp"}}
	pkgs := c.packages()
	versions := make([]string, 0, len(pkgs))
	for _, pkg := range pkgs {
		files := c.filesOf(pkg)
		l, err := layerOf(withParents(debLayerFiles(files)), created)
		if err != nil {
			return nil, fmt.Errorf("layer of %s: %w", pkg, err)
		}
		name, _, _ := strings.Cut(pkg, ":")
		versions = append(versions, name+"="+db.version(pkg))
		parts = append(parts, layerPart{layer: l, comment: name,
			createdBy: fmt.Sprintf("hack/image: Debian package %s %s: %s", name, db.version(pkg), paths(files))})
	}
	arch := goArch[c.machine]
	img, err := assemble("linux", arch, created, parts, v1.Config{
		User:       fmt.Sprintf("%d:%d", memcacheUID, memcacheUID),
		Entrypoint: []string{memcachedProgram},
		// memcached saves its memory file (-e, the Memcached's warmRestart)
		// only on SIGUSR1, and stops cleanly on it without one; the image
		// has no shell to send it from a preStop hook, and a container's
		// lifecycle.stopSignal needs the ContainerStopSignals feature.
		StopSignal:   "SIGUSR1",
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		ExposedPorts: map[string]struct{}{"11211/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "memcached",
			"org.opencontainers.image.description": "memcached from Debian's package, with only the files it runs on",
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.source":      sourceURL,
			debianPackagesKey:                      strings.Join(versions, " "),
		},
	})
	if err != nil {
		return nil, err
	}
	tag, _, _ := strings.Cut(version, "-")
	if _, after, ok := strings.Cut(tag, ":"); ok { // an epoch is not part of the tag
		tag = after
	}
	return &MemcachedImage{Image: img, Version: version, Tag: tag, Packages: versions}, nil
}

// memcachedBaseFiles: the user the pods run as has a name, /tmp exists.
func memcachedBaseFiles() []file {
	return []file{
		{name: "/etc", mode: 0o755, dir: true},
		{name: "/etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/usr/sbin/nologin\n" +
				fmt.Sprintf("memcache:x:%d:%d:memcached:/nonexistent:/usr/sbin/nologin\n", memcacheUID, memcacheUID))},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\n" + fmt.Sprintf("memcache:x:%d:\n", memcacheUID))},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")},
		{name: "/tmp", mode: 0o1777, dir: true},
	}
}

func debLayerFiles(files []*debFile) []file {
	out := make([]file, 0, len(files))
	for _, f := range files {
		out = append(out, file{name: f.path, mode: int64(f.mode.Perm()), link: f.link, data: f.data})
	}
	return out
}

// withParents adds the directories (0755, root) above the files, and sorts
// the entries so that each directory comes before what it holds.
func withParents(files []file) []file {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.name); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	out := append([]file(nil), files...)
	for d := range dirs {
		out = append(out, file{name: d, mode: 0o755, dir: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func paths(files []*debFile) string {
	ps := make([]string, 0, len(files))
	for _, f := range files {
		ps = append(ps, f.path)
	}
	return strings.Join(ps, " ")
}
