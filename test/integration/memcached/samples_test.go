package memcached

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// sampleDocs are the objects of one config/samples file.
func sampleDocs(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Every Memcached sample is accepted by the CRD under strict field
// validation (server-side dry run; cert-manager's kinds are not installed
// here and are skipped).
func TestMemcachedSamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "cache_v1alpha1_memcached*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("samples %v (%v): want the plain, TLS+auth, StatefulSet, overrides and sidecar samples", files, err)
	}
	ns := newNamespace(t)
	for _, f := range files {
		for _, u := range sampleDocs(t, filepath.Base(f)) {
			if u.GetAPIVersion() == "cert-manager.io/v1" {
				continue
			}
			u.SetNamespace(ns)
			if err := env.client.Create(context.Background(), u, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				t.Errorf("%s: %s %s rejected: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// The sidecar sample, created for real in a namespace that enforces the
// restricted level, renders a pod the apiserver's PodSecurity admission
// accepts, with the sidecar's key referenced from the opted-in Secret.
func TestSidecarSampleIsAdmittedAsRestricted(t *testing.T) {
	g := NewWithT(t)
	ns := restrictedNamespace(t)
	var name string
	for _, u := range sampleDocs(t, "cache_v1alpha1_memcached_sidecar.yaml") {
		u.SetNamespace(ns)
		g.Expect(env.client.Create(context.Background(), u)).To(Succeed())
		if u.GetKind() == "Memcached" {
			name = u.GetName()
		}
	}
	d := eventuallyDeployment(t, ns, name, func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Spec.InitContainers).To(HaveLen(2))
	})
	shipper := d.Spec.Template.Spec.InitContainers[1]
	g.Expect(shipper.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
	g.Expect(shipper.Env).To(ContainElement(HaveField("ValueFrom.SecretKeyRef.Name", "forward-key")))
	g.Expect(restrictedProblems(g, &d.Spec.Template)).To(BeEmpty())
	g.Expect(admitPod(ns, &d.Spec.Template)).To(Succeed())
	eventuallyCondition(t, ns, name, cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)
}
