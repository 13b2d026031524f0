package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RunSuite is the TestMain of a suite that needs a control plane (envtest
// or a local cluster): under -short (`make test-unit`) it runs none of the
// suite's tests and says so on stdout, with what the suite needs; otherwise
// it exits with run's code. Every such suite behaves the same way, so
// `go test -short ./...` is exactly the tests that need nothing.
func RunSuite(m *testing.M, needs string, run func(*testing.M) int) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("SKIP %s: every test here needs %s; run without -short\n", callerPackage(), needs)
		os.Exit(0)
	}
	os.Exit(run(m))
}

// callerPackage is the directory of RunSuite's caller, relative to the
// repository.
func callerPackage() string {
	_, file, _, ok := runtime.Caller(2)
	if !ok {
		return "suite"
	}
	rel, err := filepath.Rel(RepoRoot(), filepath.Dir(file))
	if err != nil {
		return filepath.Dir(file)
	}
	return "./" + rel
}

// RandomName is prefix-<6 random hex digits>: names that never collide
// between tests, runs (-count=N) or packages sharing a cluster.
func RandomName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// CreateNamespace creates a namespace with a random name and deletes it
// when the test ends.
func CreateNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RandomName(prefix)}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// SkipUnderShort skips one test that needs what (a control plane, a
// cluster) under -short, in packages that mix such tests with others;
// suites where every test needs it use RunSuite.
func SkipUnderShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s; run without -short", what)
	}
}
