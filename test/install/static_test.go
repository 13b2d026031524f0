package install

import (
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/runbook-dev/runbook/test/testenv"
)

// TestStaticManagerBinary builds the manager the way the image does
// (`make build-static`: CGO disabled), proves the ELF file needs no dynamic
// loader or shared library — so it runs on gcr.io/distroless/static — and
// runs it.
func TestStaticManagerBinary(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, nil, "make", "-s", "build-static", "BIN="+dir)
	bin := filepath.Join(dir, "manager-static")

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", bin, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: it is dynamically linked", bin, p.Type)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("reading imported libraries: %v", err)
	}
	if len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", bin, libs)
	}

	// The flag package exits 0 after printing the usage for --help.
	r, err := runCommand(dir, nil, nil, bin, "--help")
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	usage := string(r.stderr) + string(r.stdout)
	for _, flag := range []string{"-controllers", "-leader-elect", "-metrics-bind-address", "-health-probe-bind-address"} {
		if !strings.Contains(usage, flag) {
			t.Errorf("--help does not list %s:\n%s", flag, usage)
		}
	}
}

// TestDockerfileBuildsTheStaticBinary keeps the Dockerfile (which cannot be
// built here: there is no container engine) on the same build as
// TestStaticManagerBinary: CGO disabled, distroless static non-root base.
func TestDockerfileBuildsTheStaticBinary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^FROM golang:1\.26 AS builder$`),
		regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 .*go build .*-o manager \./cmd$`),
		regexp.MustCompile(`(?m)^ARG BASE_IMAGE=gcr\.io/distroless/static:nonroot$`),
		regexp.MustCompile(`(?m)^FROM \$\{BASE_IMAGE\}$`),
		regexp.MustCompile(`(?m)^USER 65532:65532$`),
		regexp.MustCompile(`(?m)^ENTRYPOINT \["/manager"\]$`),
	} {
		if !want.MatchString(strings.ReplaceAll(df, "\\\n    ", "")) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
}
