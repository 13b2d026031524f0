package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// collectorKnobs are the functions that change how the Go collector runs.
// The manager's memory is the user's to bound with GOGC and GOMEMLIMIT
// (docs/install.md#memory): no product code calls these.
var collectorKnobs = map[string][]string{
	"runtime/debug": {"SetGCPercent", "SetMemoryLimit", "FreeOSMemory"},
	"runtime":       {"GC"},
}

func TestNothingTunesTheCollectorAtRunTime(t *testing.T) {
	var checked int
	for _, dir := range []string{".", "../internal", "../api"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			checked++
			for _, call := range knobCalls(t, path) {
				t.Errorf("%s calls %s: the product must not tune the collector at run time", path, call)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d product files checked: the walk is looking in the wrong place", checked)
	}
}

// knobCalls lists the calls of collectorKnobs in one file, resolving the
// names its imports give the packages.
func knobCalls(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{} // name in the file -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := collectorKnobs[p]; !ok {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = p
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || local[pkg.Name] == "" {
			return true
		}
		for _, fn := range collectorKnobs[local[pkg.Name]] {
			if sel.Sel.Name == fn {
				out = append(out, local[pkg.Name]+"."+fn)
			}
		}
		return true
	})
	return out
}
