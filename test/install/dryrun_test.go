package install

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// apiserver is an envtest control plane that kubectl talks to.
type apiserver struct {
	kubectl, kubeconfig string
}

func startAPIServer(t *testing.T) *apiserver {
	t.Helper()
	testenv.SkipUnderShort(t, "an apiserver (envtest)")
	kubectl := kubectlBin(t)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "install-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("provisioning a kubectl user: %v", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &apiserver{kubectl: kubectl, kubeconfig: path}
}

func (a *apiserver) run(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return mustRun(t, stdin, a.kubectl, append([]string{"--kubeconfig", a.kubeconfig}, args...)...)
}

// waitEstablished waits for the named CRDs, every CRD when none is named.
func (a *apiserver) waitEstablished(t *testing.T, names ...string) {
	t.Helper()
	kubectl := func(ctx context.Context, args ...string) (string, error) {
		r, err := runCommand(testenv.RepoRoot(), nil, nil, a.kubectl, append([]string{"--kubeconfig", a.kubeconfig}, args...)...)
		return string(r.stdout), err
	}
	if err := cluster.WaitEstablished(context.Background(), 2*time.Minute, kubectl, names...); err != nil {
		t.Fatal(err)
	}
}

// dryRun applies a rendered stream with server-side apply in server dry-run
// mode: the apiserver validates every object (schemas, CRD validation,
// admission including Pod Security) without persisting it. It fails on any
// error, on a Pod Security warning, and when not every object was applied.
func (a *apiserver) dryRun(t *testing.T, rendered []byte) {
	t.Helper()
	objs := decodeObjects(t, rendered)
	r := a.run(t, rendered, "apply", "--server-side", "--dry-run=server", "--field-manager=runbook-install", "-f", "-")
	if w := string(r.stderr); strings.Contains(w, "PodSecurity") || strings.Contains(w, "Warning") {
		t.Errorf("the apiserver warned:\n%s", w)
	}
	applied := strings.Count(string(r.stdout), "serverside-applied (server dry run)")
	if applied != len(objs) {
		t.Errorf("%d of %d objects applied in dry-run:\n%s", applied, len(objs), r.stdout)
	}
}

// createNamespaces creates the Namespace objects of a rendered stream for
// real: a dry-run create of the namespace would not make the namespaced
// objects after it valid.
func (a *apiserver) createNamespaces(t *testing.T, rendered []byte) {
	t.Helper()
	var docs [][]byte
	var names []string
	for _, o := range decodeObjects(t, rendered) {
		if o.GetKind() == "Namespace" {
			docs = append(docs, marshalDoc(t, o))
			names = append(names, o.GetName())
		}
	}
	if len(docs) == 0 {
		t.Fatal("no Namespace rendered")
	}
	a.run(t, bytes.Join(docs, nil), "apply", "--server-side", "-f", "-")
	// Have the apiserver also warn (not only enforce, which rejects pods but
	// not workloads) about restricted violations of the pod templates.
	for _, n := range names {
		a.run(t, nil, "label", "namespace", n, "--overwrite", "pod-security.kubernetes.io/warn=restricted")
	}
}

// TestServerSideDryRun installs the chart's CRDs for real, then has the
// apiserver validate every object of config/default and of the chart.
func TestServerSideDryRun(t *testing.T) {
	a := startAPIServer(t)

	// testenv installed config/crd/bases; the chart's crds/ must apply over
	// them cleanly (they are the same objects) and be served.
	a.run(t, nil, "apply", "--server-side", "--force-conflicts", "-f", repoPath("charts", "runbook", "crds"))
	a.waitEstablished(t)

	t.Run("Pod Security warnings are detected", func(t *testing.T) {
		// A positive control for the warning check below: a privileged
		// Deployment in a restricted namespace must draw a warning.
		a.run(t, []byte(restrictedNamespace("pss-control")), "apply", "--server-side", "-f", "-")
		r := a.run(t, []byte(privilegedDeployment), "apply", "--server-side", "--dry-run=server", "-f", "-")
		if !strings.Contains(string(r.stderr), "would violate PodSecurity") {
			t.Fatalf("no Pod Security warning for a privileged Deployment; stderr:\n%s", r.stderr)
		}
	})

	t.Run("config/default", func(t *testing.T) {
		out := kustomizeBuild(t, repoPath("config", "default"))
		a.createNamespaces(t, out)
		a.dryRun(t, out)
	})

	// prometheus-operator's ServiceMonitor and PrometheusRule CRDs with
	// their real schemas: a rendered object with a wrong field fails the
	// dry-runs below.
	a.run(t, nil, "apply", "--server-side", "-f", testenv.ServiceMonitorCRD(), "-f", testenv.PrometheusRuleCRD())
	a.waitEstablished(t, "servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")

	t.Run("a ServiceMonitor with a misplaced field is refused", func(t *testing.T) {
		// Positive control: the CRD really validates.
		bad := []byte(`apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: bad, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  endpoints: [{port: metrics, scrapeInterval: 30s}]
`)
		_, err := runCommand(testenv.RepoRoot(), bad, nil, a.kubectl, "--kubeconfig", a.kubeconfig,
			"apply", "--server-side", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), "scrapeInterval") {
			t.Fatalf("a ServiceMonitor endpoint with an unknown field was accepted: %v", err)
		}
	})

	t.Run("config/default with ServiceMonitor, network policy and exec probe scripts", func(t *testing.T) {
		out := kustomizeBuild(t, enableOptional(t, "- ../prometheus", "- ../network-policy", "components:", "- ../exec-probes"))
		objs := objectSet(decodeObjects(t, out))
		if len(objs.ofKind("ServiceMonitor")) != 1 || len(objs.ofKind("PrometheusRule")) != 1 {
			t.Fatal("config/prometheus renders no ServiceMonitor or no PrometheusRule")
		}
		a.createNamespaces(t, out)
		a.dryRun(t, out)
	})

	t.Run("Helm chart", func(t *testing.T) {
		a.run(t, []byte(restrictedNamespace(helmNamespace)), "apply", "--server-side", "-f", "-")
		a.dryRun(t, mustHelmTemplate(t, helmNamespace))
		a.dryRun(t, mustHelmTemplate(t, helmNamespace,
			"--set", "metrics.networkPolicy.enabled=true", "--set", "execProbes.enabled=true",
			"--set-string", "execProbes.scripts.check\\.sh=#!/bin/sh\nexit 0\n"))
		a.dryRun(t, mustHelmTemplate(t, helmNamespace,
			"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom"))
		a.dryRun(t, mustHelmTemplate(t, helmNamespace,
			"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.prometheusRule.labels.release=prom",
			"--set", "monitoring.grafanaDashboards.enabled=true"))
	})
}

func restrictedNamespace(name string) string {
	return `apiVersion: v1
kind: Namespace
metadata:
  name: ` + name + `
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
`
}

const privilegedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: privileged
  namespace: pss-control
spec:
  selector:
    matchLabels: {app: privileged}
  template:
    metadata:
      labels: {app: privileged}
    spec:
      containers:
      - name: c
        image: example
        securityContext:
          privileged: true
`

// marshalDoc renders one object as a YAML document of a stream.
func marshalDoc(t *testing.T, o *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("---\n"), b...)
}
