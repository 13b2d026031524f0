package install

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityDocSaysWhatTheImageIs: docs/security.md describes the image
// `make image` builds — hack/image assembles its own base from files, it
// pulls no distroless image — and ties distroless only to the Dockerfile,
// the build for hosts with a container engine. The user it names is
// hack/image's.
func TestSecurityDocSaysWhatTheImageIs(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Restricted Pod Security")
	if !ok {
		t.Fatal("docs/security.md has no Restricted Pod Security section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	// One claim per bullet or paragraph.
	claims := regexp.MustCompile(`\n(?:- |\n)`).Split(section, -1)
	for _, c := range claims {
		if strings.Contains(c, "distroless") && !strings.Contains(c, "Dockerfile") {
			t.Errorf("docs/security.md ties the image to distroless, but `make image` builds its own base (hack/image):\n%s", strings.TrimSpace(c))
		}
	}
	for _, want := range []string{"`make image`", "hack/image", "no shell"} {
		if !strings.Contains(section, want) {
			t.Errorf("docs/security.md's image claim does not mention %s", want)
		}
	}
	build, err := os.ReadFile(repoPath("hack", "image", "build.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`nonRootUID\s*=\s*(\d+)`).FindSubmatch(build)
	if m == nil {
		t.Fatal("hack/image/build.go defines no nonRootUID")
	}
	if !strings.Contains(section, "user is "+string(m[1])) {
		t.Errorf("docs/security.md does not name the image's user %s", m[1])
	}
}
