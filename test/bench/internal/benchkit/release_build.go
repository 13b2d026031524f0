package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/runbook-dev/runbook/test/testenv"
)

// releaseFlagsVar is the Makefile variable holding the go build flags of
// every release build (make build, build-static, image). The benchmarks
// read it from the Makefile rather than repeat it, so that what they
// measure is what ships.
const releaseFlagsVar = "STATIC_BUILD_FLAGS"

// ReleaseBuildFlags are the go build arguments of STATIC_BUILD_FLAGS in the
// repository's Makefile, split as the shell would split them.
func ReleaseBuildFlags() ([]string, error) {
	path := filepath.Join(testenv.RepoRoot(), "Makefile")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":=")
		if ok && strings.TrimSpace(name) == releaseFlagsVar {
			return splitShellWords(strings.TrimSpace(value))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no %s := line", path, releaseFlagsVar)
}

// splitShellWords splits s at unquoted blanks and removes the quotes, the
// subset of sh the Makefile's flags use ("-ldflags="-s -w"").
func splitShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// BuildReleaseManager compiles the manager (./cmd) into dir the way the
// release does (CGO disabled, ReleaseBuildFlags) and returns its path and
// the flags used.
func BuildReleaseManager(ctx context.Context, dir string) (string, []string, error) {
	return BuildRelease(ctx, dir, "./cmd", "manager")
}

// BuildRelease compiles the main package pkg (relative to the repository)
// into dir/name with the release's flags, so that an operator measured
// side by side with the manager is built the same way.
func BuildRelease(ctx context.Context, dir, pkg, name string) (string, []string, error) {
	flags, err := ReleaseBuildFlags()
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return out, flags, nil
}
