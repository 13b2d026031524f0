package rebootpolicy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/test/testenv"
)

// TestSamplesAreAccepted creates every object of the RebootPolicy samples
// (server-side dry run), so the samples stay valid against the CRD.
func TestSamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "autoreboot_v1alpha1_rebootpolicy_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d RebootPolicy samples, want one per trigger", len(files))
	}
	ns := createNamespace(t, "samples")
	policies := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace(ns)
			// Strict: a field the CRD no longer has (a sample left behind by
			// an API change) is an error, not silently dropped.
			if err := k8s.Create(context.Background(), &u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%s: %s %s rejected: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
			if u.GetKind() == "RebootPolicy" {
				policies++
			}
		}
	}
	if policies < len(files) {
		t.Fatalf("%d RebootPolicies in %d sample files", policies, len(files))
	}
}
