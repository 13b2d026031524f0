package realnode

import (
	"slices"
	"testing"
)

func TestImportedNames(t *testing.T) {
	out := "runbook.local/pause:v0.1.0   \tsaved\t\napplication/vnd.oci.image.index.v1+json sha256:aed5\n" +
		"Importing\telapsed: 0.4 s\ttotal:   0.0 B\t(0.0 B/s)\t\rrunbook.local/runbook-manager:v0.1.0\tsaved\t\n" +
		"runbook.local/pause:v0.1.0   \tsaved\t\n"
	got := importedNames(out)
	want := []string{"runbook.local/pause:v0.1.0", "runbook.local/runbook-manager:v0.1.0"}
	if !slices.Equal(got, want) {
		t.Fatalf("importedNames = %v, want %v", got, want)
	}
}

func TestTrimTag(t *testing.T) {
	for in, want := range map[string]string{
		"runbook.local/web:v0.1.0":      "runbook.local/web",
		"registry:5000/web":             "registry:5000/web",
		"registry:5000/team/web:v1.2.3": "registry:5000/team/web",
		"web":                           "web",
	} {
		if got := trimTag(in); got != want {
			t.Errorf("trimTag(%q) = %q, want %q", in, got, want)
		}
	}
}
