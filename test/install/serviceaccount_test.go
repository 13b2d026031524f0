package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

const managerServiceAccount = "runbook-controller-manager"

// TestManagerRunsAsItsServiceAccount proves the installed RBAC is enough,
// not just narrow: the real manager binary runs against a real apiserver
// (RBAC authorization) authenticated as the ServiceAccount that config/rbac
// binds, with every controller on. Its caches sync (list/watch granted), it
// wins the leader Lease (leader election Role), every sample object gets
// conditions for its current generation (writes and status granted), no
// request is refused, and /metrics answers only authorized callers (metrics
// auth role, metrics reader role).
func TestManagerRunsAsItsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	a := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// Install config/default for real, without the manager Deployment (no
	// kubelet runs it here; the binary runs below instead).
	var install []byte
	for _, o := range decodeObjects(t, kustomizeBuild(t, repoPath("config", "default"))) {
		if o.GetKind() == "Deployment" {
			continue
		}
		install = append(install, marshalDoc(t, o)...)
	}
	a.run(t, install, "apply", "--server-side", "--force-conflicts", "-f", "-")

	// The manager authenticates with a token of its ServiceAccount.
	token := strings.TrimSpace(string(a.run(t, nil, "create", "token", managerServiceAccount, "-n", systemNamespace, "--duration=2h").stdout))
	kubeconfig := a.tokenKubeconfig(t, token)

	bin, err := cluster.BuildManager(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	probes := t.TempDir()
	if err := os.WriteFile(filepath.Join(probes, "check-license.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	m, err := cluster.StartManager(ctx, bin, kubeconfig,
		"--controllers=all",
		"--leader-elect", "--leader-election-namespace="+systemNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port),
		"--exec-probe-dir="+probes,
		"--operator-namespace="+systemNamespace,
		"--probe-allow=127.0.0.1:3306,127.0.0.1:5432",
	)
	if err != nil {
		t.Fatalf("the manager, running as its ServiceAccount, did not become ready (caches not synced: missing list/watch?): %v", err)
	}
	defer func() {
		_ = m.Stop()
		// Nothing the manager asked for may have been refused (checked also
		// when a step below failed: it is the likely cause).
		for _, line := range strings.Split(m.Logs(), "\n") {
			if strings.Contains(line, "is forbidden: User") {
				t.Errorf("the apiserver refused a request of the manager's ServiceAccount (a +kubebuilder:rbac marker is missing):\n%s", line)
				break
			}
		}
		m.DumpLogsOnFailure(t.Failed())
	}()

	// Leader election works with the namespaced Role.
	g.Eventually(func() string {
		r, err := runCommand(testenv.RepoRoot(), nil, nil, a.kubectl, "--kubeconfig", a.kubeconfig,
			"get", "lease", "runbook.runbook.dev", "-n", systemNamespace, "-o", "jsonpath={.spec.holderIdentity}")
		if err != nil {
			return ""
		}
		return string(r.stdout)
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty(), "the manager never acquired the leader Lease")

	// Every sample gets conditions for its current generation.
	const ns = "install-samples"
	a.run(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), "apply", "--server-side", "-f", "-")
	samples := decodeObjects(t, kustomizeBuild(t, repoPath("config", "samples")))
	if len(samples) == 0 {
		t.Fatal("config/samples renders no object")
	}
	a.run(t, kustomizeBuild(t, repoPath("config", "samples")), "apply", "--server-side", "-n", ns, "-f", "-")
	admin := a.adminClient(t)
	runbookObjects := 0
	for _, s := range samples {
		if !strings.HasSuffix(s.GroupVersionKind().Group, ".runbook.dev") {
			continue // e.g. the ConfigMap a watch sample watches
		}
		runbookObjects++
		key := client.ObjectKey{Name: s.GetName()}
		if namespaced(t, admin, s) {
			key.Namespace = ns
		}
		g.Eventually(func(g Gomega) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(s.GroupVersionKind())
			g.Expect(admin.Get(ctx, key, u)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			g.Expect(conds).NotTo(BeEmpty(), "%s %s has no conditions", s.GetKind(), key)
			for _, c := range conds {
				og, _, _ := unstructured.NestedInt64(c.(map[string]any), "observedGeneration")
				g.Expect(og).To(Equal(u.GetGeneration()), "%s %s condition %v is not for generation %d", s.GetKind(), key, c, u.GetGeneration())
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	}

	if runbookObjects < 3 {
		t.Errorf("config/samples has %d Runbook objects, want at least one per kind", runbookObjects)
	}

	// Metrics: 401 without a token, 403 for a ServiceAccount not bound to
	// runbook-metrics-reader, 200 once it is.
	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	g.Expect(scrape(t, metricsURL, "")).To(Equal(http.StatusUnauthorized))
	a.run(t, nil, "create", "serviceaccount", "scraper", "-n", ns)
	scraper := strings.TrimSpace(string(a.run(t, nil, "create", "token", "scraper", "-n", ns).stdout))
	g.Expect(scrape(t, metricsURL, scraper)).To(Equal(http.StatusForbidden))
	a.run(t, nil, "create", "clusterrolebinding", "scraper-metrics", "--clusterrole=runbook-metrics-reader", "--serviceaccount="+ns+":scraper")
	g.Eventually(func() int { return scrape(t, metricsURL, scraper) }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal(http.StatusOK))
}

// scrape GETs url with an optional bearer token and returns the status code.
func scrape(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics server's certificate is self-signed.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && !strings.Contains(string(body), "controller_runtime_reconcile_total") {
		t.Errorf("/metrics lacks controller_runtime_reconcile_total")
	}
	return resp.StatusCode
}

// tokenKubeconfig writes a kubeconfig that authenticates with token only.
func (a *apiserver) tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(a.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := admin.Contexts[admin.CurrentContext]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = admin.Clusters[cur.Cluster]
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "manager"}
	cfg.CurrentContext = "manager"
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminClient is a controller-runtime client with the admin kubeconfig.
func (a *apiserver) adminClient(t *testing.T) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", a.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespaced(t *testing.T, c client.Client, o *unstructured.Unstructured) bool {
	t.Helper()
	ok, err := c.IsObjectNamespaced(o)
	if err != nil {
		t.Fatalf("%s: %v", o.GroupVersionKind(), err)
	}
	return ok
}
