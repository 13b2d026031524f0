package main

import (
	"bufio"
	"bytes"
	"crypto/md5" //nolint:gosec // dpkg records md5 sums; this checks files against them, not for security
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// dpkgDB is what dpkg knows about the installed packages: which package
// owns each path, each package's version, and the md5 sum of each of its
// regular files. root is the filesystem the database describes ("/").
type dpkgDB struct {
	root     string
	infoDir  string
	owner    map[string]string // absolute path -> package (as the .list file names it, e.g. libc6:amd64)
	versions map[string]string // package (with and without :arch) -> version
}

func loadDpkgDB(root string) (*dpkgDB, error) {
	db := &dpkgDB{
		root:     root,
		infoDir:  filepath.Join(root, "var/lib/dpkg/info"),
		owner:    map[string]string{},
		versions: map[string]string{},
	}
	lists, err := filepath.Glob(filepath.Join(db.infoDir, "*.list"))
	if err != nil {
		return nil, err
	}
	if len(lists) == 0 {
		return nil, fmt.Errorf("no dpkg file lists in %s: not a Debian system", db.infoDir)
	}
	sort.Strings(lists)
	for _, l := range lists {
		pkg := strings.TrimSuffix(filepath.Base(l), ".list")
		b, err := os.ReadFile(l)
		if err != nil {
			return nil, err
		}
		for _, p := range strings.Split(string(b), "\n") {
			// A path listed by two packages (a shared directory) keeps
			// its first owner; files are owned by one package.
			if p != "" && db.owner[p] == "" {
				db.owner[p] = pkg
			}
		}
	}
	return db, db.readStatus()
}

// readStatus reads the versions of the installed packages.
func (db *dpkgDB) readStatus() error {
	b, err := os.ReadFile(filepath.Join(db.root, "var/lib/dpkg/status"))
	if err != nil {
		return err
	}
	for _, stanza := range strings.Split(string(b), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
				fields[k] = v
			}
		}
		if fields["Package"] == "" || !strings.HasSuffix(fields["Status"], " installed") {
			continue
		}
		db.versions[fields["Package"]] = fields["Version"]
		db.versions[fields["Package"]+":"+fields["Architecture"]] = fields["Version"]
	}
	return nil
}

// version of pkg as dpkg names it in its file lists (with or without :arch).
func (db *dpkgDB) version(pkg string) string { return db.versions[pkg] }

// md5sums of pkg's regular files, by absolute path.
func (db *dpkgDB) md5sums(pkg string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(db.infoDir, pkg+".md5sums"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		sum, p, ok := strings.Cut(sc.Text(), "  ")
		if ok {
			out["/"+p] = sum
		}
	}
	return out, sc.Err()
}

// debFile is one path of the image taken from an installed package: a
// regular file (data) or a symbolic link (link).
type debFile struct {
	path, pkg string
	mode      fs.FileMode
	link      string
	data      []byte
	mtime     time.Time
}

// closure is the set of files a program needs from the installed
// packages: the program, its dynamic loader and every shared library it
// links, transitively (DT_NEEDED), each at the path its package installs
// it to, with the symbolic links on the way.
type closure struct {
	db      *dpkgDB
	libDirs []string // the loader's default search path, in its order
	files   map[string]*debFile
	sums    map[string]map[string]string
	machine elf.Machine
}

// multiarch is the Debian triplet of the loader's library directories.
var multiarch = map[elf.Machine]string{elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu"}

// goArch is the image platform of an ELF machine.
var goArch = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}

// resolveProgram collects the closure of the program at prog (an absolute
// path owned by an installed package).
func resolveProgram(db *dpkgDB, prog string) (*closure, error) {
	f, err := elf.Open(db.host(prog))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prog, err)
	}
	machine := f.Machine
	_ = f.Close()
	triplet, ok := multiarch[machine]
	if !ok {
		return nil, fmt.Errorf("%s: unsupported machine %s", prog, machine)
	}
	c := &closure{
		db: db,
		// What ld.so --help prints as the system search path on Debian.
		libDirs: []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"},
		files:   map[string]*debFile{},
		sums:    map[string]map[string]string{},
		machine: machine,
	}
	queue := []string{prog}
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		real, err := c.add(p)
		if err != nil {
			return nil, err
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		deps, err := c.dependencies(real)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", real, err)
		}
		queue = append(queue, deps...)
	}
	return c, nil
}

// host is where p of the described filesystem is on this machine.
func (db *dpkgDB) host(p string) string { return filepath.Join(db.root, p) }

// dependencies are the paths of the loader and the libraries that the ELF
// file at p (a regular file of the closure) asks for.
func (c *closure) dependencies(p string) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(c.files[p].data))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if f.Machine != c.machine {
		return nil, fmt.Errorf("built for %s, the program for %s", f.Machine, c.machine)
	}
	var out []string
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return nil, err
			}
			out = append(out, string(bytes.TrimRight(b, "\x00")))
		}
	}
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		if v, _ := f.DynString(tag); len(v) > 0 {
			return nil, fmt.Errorf("has %s %v: only the loader's default search path is supported", tag, v)
		}
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		return nil, err
	}
	for _, soname := range needed {
		lib, err := c.findLibrary(soname)
		if err != nil {
			return nil, err
		}
		out = append(out, lib)
	}
	return out, nil
}

// findLibrary searches the loader's default directories for soname, as
// ld.so does without a cache, among the paths installed packages own.
func (c *closure) findLibrary(soname string) (string, error) {
	if strings.Contains(soname, "/") {
		return "", fmt.Errorf("DT_NEEDED %q is a path", soname)
	}
	for _, dir := range c.libDirs {
		p := path.Join(dir, soname)
		if c.db.owner[p] == "" {
			continue
		}
		if ok, err := c.loadable(p); err != nil {
			return "", err
		} else if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("no installed package has %s in %v", soname, c.libDirs)
}

// loadable: the library at p is an ELF object of the program's machine
// (ld.so skips the others).
func (c *closure) loadable(p string) (bool, error) {
	f, err := elf.Open(c.db.host(p))
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return false, nil
		}
		return false, err
	}
	defer func() { _ = f.Close() }()
	return f.Machine == c.machine, nil
}

// add takes p into the closure, following symbolic links (each link is
// kept, so the image has the same names as the package), and returns the
// regular file p finally names.
func (c *closure) add(p string) (string, error) {
	for hops := 0; hops < 16; hops++ {
		pkg := c.db.owner[p]
		if pkg == "" {
			return "", fmt.Errorf("%s: no installed package owns it", p)
		}
		st, err := os.Lstat(c.db.host(p))
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return p, c.addRegular(p, pkg, st)
		}
		target, err := os.Readlink(c.db.host(p))
		if err != nil {
			return "", err
		}
		c.files[p] = &debFile{path: p, pkg: pkg, mode: 0o777 | fs.ModeSymlink, link: target, mtime: st.ModTime()}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		p = path.Clean(target)
	}
	return "", fmt.Errorf("%s: too many symbolic links", p)
}

// addRegular reads the regular file p of pkg and checks it against dpkg's
// md5 sum: the image holds the package's files, not whatever is there.
func (c *closure) addRegular(p, pkg string, st fs.FileInfo) error {
	if _, ok := c.files[p]; ok {
		return nil
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", p, st.Mode())
	}
	sums, ok := c.sums[pkg]
	if !ok {
		var err error
		if sums, err = c.db.md5sums(pkg); err != nil {
			return fmt.Errorf("md5 sums of %s: %w", pkg, err)
		}
		c.sums[pkg] = sums
	}
	data, err := os.ReadFile(c.db.host(p))
	if err != nil {
		return err
	}
	sum := md5.Sum(data) //nolint:gosec // compared with dpkg's record
	if want := sums[p]; want != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("%s: md5 %x, package %s %s records %q: the file is not the package's", p, sum, pkg, c.db.version(pkg), want)
	}
	c.files[p] = &debFile{path: p, pkg: pkg, mode: st.Mode().Perm(), data: data, mtime: st.ModTime()}
	return nil
}

// addCopyright adds each package's /usr/share/doc/<name>/copyright: the
// licences travel with the binaries.
func (c *closure) addCopyright() error {
	for _, pkg := range c.packages() {
		name, _, _ := strings.Cut(pkg, ":")
		p := "/usr/share/doc/" + name + "/copyright"
		if c.db.owner[p] == "" {
			return fmt.Errorf("%s has no %s", pkg, p)
		}
		if _, err := c.add(p); err != nil {
			return err
		}
	}
	return nil
}

// packages of the closure, sorted.
func (c *closure) packages() []string {
	set := map[string]bool{}
	for _, f := range c.files {
		set[f.pkg] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// filesOf pkg, sorted by path.
func (c *closure) filesOf(pkg string) []*debFile {
	var out []*debFile
	for _, f := range c.files {
		if f.pkg == pkg {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// newest modification time of the closure's regular files: the packages'
// own build times (dpkg keeps them), so the image's times depend on the
// package versions only, not on when they were installed or built here.
func (c *closure) newest() time.Time {
	var t time.Time
	for _, f := range c.files {
		if f.link == "" && f.mtime.After(t) {
			t = f.mtime
		}
	}
	return t.UTC().Truncate(time.Second)
}
