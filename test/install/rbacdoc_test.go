package install

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	rbacTableBegin = "<!-- rbac-table:begin (make docs-rbac) -->"
	rbacTableEnd   = "<!-- rbac-table:end -->"
)

// markerUsers maps "group/resource" to the controllers whose
// +kubebuilder:rbac markers ask for it.
func markerUsers(t *testing.T) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`\+kubebuilder:rbac:groups=("?)([^,"]*)("?),resources=([^,]+),verbs=`)
	files, err := filepath.Glob(repoPath("internal", "controller", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		controller := filepath.Base(filepath.Dir(f))
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			for _, group := range strings.Split(m[2], ";") {
				for _, res := range strings.Split(m[4], ";") {
					k := group + "/" + res
					if !slices.Contains(users[k], controller) {
						users[k] = append(users[k], controller)
						slices.Sort(users[k])
					}
				}
			}
		}
	}
	return users
}

// rbacTable renders the generated ClusterRole as a Markdown table.
func rbacTable(t *testing.T) string {
	t.Helper()
	role := readClusterRole(t, repoPath("config", "rbac", "role.yaml"))
	users := markerUsers(t)
	var b strings.Builder
	b.WriteString("| API group | resource | verbs | asked for by |\n|---|---|---|---|\n")
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				group := g
				if group == "" {
					group = "core"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", group, res, strings.Join(r.Verbs, ", "), strings.Join(users[g+"/"+res], ", "))
			}
		}
	}
	return b.String()
}

// TestSecurityDocListsTheRBACRules keeps the rules table of docs/security.md
// equal to the generated ClusterRole. `make docs-rbac` rewrites it.
func TestSecurityDocListsTheRBACRules(t *testing.T) {
	path := repoPath("docs", "security.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(rbacTableBegin)), bytes.Index(doc, []byte(rbacTableEnd))
	if begin < 0 || end < begin {
		t.Fatalf("docs/security.md lacks the %q ... %q markers", rbacTableBegin, rbacTableEnd)
	}
	want := rbacTable(t)
	current := string(doc[begin+len(rbacTableBegin) : end])
	if strings.TrimSpace(current) == strings.TrimSpace(want) {
		return
	}
	if os.Getenv("UPDATE_RBAC_DOC") != "" {
		updated := slices.Concat(doc[:begin+len(rbacTableBegin)], []byte("\n"+want), doc[end:])
		if err := os.WriteFile(path, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the rules table of %s", path)
		return
	}
	t.Errorf("the rules table in docs/security.md differs from config/rbac/role.yaml: run `make docs-rbac` and commit docs/security.md\nwant:\n%s", want)
}
