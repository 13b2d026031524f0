package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// memcachedImage builds the image once per test binary: it reads a few
// megabytes of libraries and compresses them.
var memcachedImage = sync.OnceValues(func() (*MemcachedImage, error) { return buildMemcached("/") })

func mustMemcachedImage(t *testing.T) *MemcachedImage {
	t.Helper()
	mc, err := memcachedImage()
	if err != nil {
		t.Fatalf("building the memcached image from the installed Debian packages (hack/check-prereqs.sh: apt-get install memcached): %v", err)
	}
	return mc
}

// unpack writes the image's layers into a new directory, as a container
// runtime would (the images here delete nothing, so no whiteouts), and
// returns it.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
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
			if !filepath.IsLocal(h.Name) {
				t.Fatalf("layer entry %q leaves the root", h.Name)
			}
			dst := filepath.Join(root, h.Name)
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(dst, fs.FileMode(h.Mode).Perm()|0o700)
			case tar.TypeSymlink:
				err = os.Symlink(h.Linkname, dst)
			case tar.TypeReg:
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(dst, b, fs.FileMode(h.Mode).Perm())
				}
			default:
				t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		_ = rc.Close()
	}
	// Sticky, world-writable /tmp, as the layer says (MkdirAll applied the umask).
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	return root
}

// inRoot resolves p inside root the way the kernel does for a process
// chrooted there: symbolic links, absolute ones included, stay inside.
func inRoot(root, p string) (string, error) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for hops := 0; len(rest) > 0; {
		next := path.Join(cur, rest[0])
		rest = rest[1:]
		st, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", errors.New("too many symbolic links")
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		rest = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), rest...)
		cur = "/"
	}
	return cur, nil
}

// TestMemcachedImageHasExactlyTheLibrariesItLinks reads the unpacked image
// with debug/elf: starting from memcached, the loader (PT_INTERP) and every
// DT_NEEDED library of every object resolve inside the image, in the
// loader's default directories; and every ELF file of the image is one of
// those: nothing more, no shell.
func TestMemcachedImageHasExactlyTheLibrariesItLinks(t *testing.T) {
	mc := mustMemcachedImage(t)
	root := unpack(t, mc.Image)
	triplet := multiarch[elfMachine(t, filepath.Join(root, memcachedProgram))]
	searchDirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"}

	reached := map[string]bool{}
	queue := []string{memcachedProgram}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		real, err := inRoot(root, p)
		if err != nil {
			t.Fatalf("%s does not resolve in the image: %v", p, err)
		}
		if reached[real] {
			continue
		}
		reached[real] = true
		f, err := elf.Open(filepath.Join(root, real))
		if err != nil {
			t.Fatalf("%s (%s): %v", p, real, err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b, _ := io.ReadAll(prog.Open())
				queue = append(queue, string(bytes.TrimRight(b, "\x00")))
			}
		}
		needed, err := f.DynString(elf.DT_NEEDED)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		for _, soname := range needed {
			found := ""
			for _, d := range searchDirs {
				if _, err := inRoot(root, path.Join(d, soname)); err == nil {
					found = path.Join(d, soname)
					break
				}
			}
			if found == "" {
				t.Errorf("%s needs %s: not in the image's %v", real, soname, searchDirs)
				continue
			}
			t.Logf("%s needs %s: %s", real, soname, found)
			queue = append(queue, found)
		}
	}

	var elves, all []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, root+"/"))
		all = append(all, rel)
		if f, err := elf.Open(p); err == nil {
			_ = f.Close()
			elves = append(elves, rel)
			if !reached[rel] {
				t.Errorf("%s is an ELF file nothing in memcached's closure loads", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(elves) != len(reached) {
		t.Errorf("ELF files %v, closure %v", elves, reached)
	}
	for _, sh := range []string{"/bin/sh", "/usr/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/dash"} {
		if _, err := inRoot(root, sh); err == nil {
			t.Errorf("the image has a shell: %s", sh)
		}
	}
	t.Logf("the image's regular files: %v", all)
}

func elfMachine(t *testing.T, p string) elf.Machine {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return f.Machine
}

// TestMemcachedImageConfig: the user the operator's pods run as, memcached
// as the entrypoint (pods give only args), Debian's version as a label, and
// the same digest from the same packages.
func TestMemcachedImageConfig(t *testing.T) {
	mc := mustMemcachedImage(t)
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "memcached").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := string(out)
	cfg, err := mc.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "11211:11211" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/bin/memcached"}) || len(cfg.Config.Cmd) != 0 || cfg.Config.StopSignal != "SIGUSR1" {
		t.Errorf("config %+v", cfg.Config)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version || mc.Version != version {
		t.Errorf("version label %q, dpkg says %q", got, version)
	}
	if !strings.HasPrefix(version, mc.Tag+"-") || strings.ContainsAny(mc.Tag, "+:~") {
		t.Errorf("tag %q of version %q", mc.Tag, version)
	}
	if pk := cfg.Config.Labels[debianPackagesKey]; !strings.Contains(pk, "memcached="+version) || !strings.Contains(pk, "libc6=") {
		t.Errorf("packages label %q", pk)
	}
	again, err := buildMemcached("/")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := mc.Image.Digest()
	d2, _ := again.Image.Digest()
	if d1 != d2 {
		t.Errorf("two builds from the same packages: %s and %s", d1, d2)
	}
	t.Logf("memcached %s image %s from %v", version, d1, mc.Packages)
}

// TestRefusesAModifiedPackageFile: a library that differs from what its
// package installed is not taken into the image.
func TestRefusesAModifiedPackageFile(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string, mode fs.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	prog, err := os.ReadFile("/usr/bin/memcached")
	if err != nil {
		t.Fatal(err)
	}
	write("usr/bin/memcached", string(prog)+"tampered", 0o755)
	write("var/lib/dpkg/status", "Package: memcached\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.6.18-1\n", 0o644)
	write("var/lib/dpkg/info/memcached.list", "/usr\n/usr/bin\n/usr/bin/memcached\n", 0o644)
	sums, err := os.ReadFile(filepath.Join("/var/lib/dpkg/info", "memcached.md5sums"))
	if err != nil {
		t.Fatal(err)
	}
	write("var/lib/dpkg/info/memcached.md5sums", string(sums), 0o644)
	_, err = buildMemcached(root)
	if err == nil || !strings.Contains(err.Error(), "not the package's") {
		t.Fatalf("a tampered memcached was accepted or refused for another reason: %v", err)
	}
	t.Log(err)
}
