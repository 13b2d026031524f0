package benchkit

import (
	"slices"
	"testing"
)

func TestSplitShellWords(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`-trimpath -tags grpcnotrace -ldflags="-s -w"`, []string{"-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w"}},
		{`  -a	'b c'  `, []string{"-a", "b c"}},
		{`""`, []string{""}},
		{``, nil},
	}
	for _, tc := range cases {
		got, err := splitShellWords(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitShellWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := splitShellWords(`-ldflags="-s`); err == nil {
		t.Error("an unbalanced quote was accepted")
	}
}

// TestReleaseBuildFlags: the Makefile's release flags are found and strip
// the binary.
func TestReleaseBuildFlags(t *testing.T) {
	flags, err := ReleaseBuildFlags()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(flags, "-trimpath") || !slices.Contains(flags, "-ldflags=-s -w") {
		t.Fatalf("release flags %q lack -trimpath or -ldflags=-s -w", flags)
	}
}
