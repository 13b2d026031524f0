package install

import (
	"debug/elf"
	"fmt"
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

	if p := dynamicLinking(bin); len(p) > 0 {
		t.Errorf("%s is not static: %v", bin, p)
	}
	// Positive control: a C program of the base system is dynamically linked,
	// and the check says so.
	if p := dynamicLinking("/bin/ls"); len(p) == 0 {
		t.Errorf("the static check finds nothing dynamic in /bin/ls")
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

// dynamicLinking lists what makes an ELF executable depend on a dynamic
// loader or shared libraries; empty means statically linked.
func dynamicLinking(path string) []string {
	f, err := elf.Open(path)
	if err != nil {
		return []string{fmt.Sprintf("not an ELF file: %v", err)}
	}
	defer func() { _ = f.Close() }()
	var out []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			out = append(out, "program header "+p.Type.String())
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		out = append(out, fmt.Sprintf("reading imported libraries: %v", err))
	}
	for _, l := range libs {
		out = append(out, "needs "+l)
	}
	return out
}
