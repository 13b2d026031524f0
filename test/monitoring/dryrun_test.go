package monitoring

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// tool is a pinned tool of the Makefile, bin/<name>-<version>.
func tool(t *testing.T, name, versionVar string) string {
	t.Helper()
	mk, err := os.ReadFile(repoPath("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + versionVar + ` \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("no %s in the Makefile", versionVar)
	}
	p := repoPath("bin", name+"-"+string(m[1]))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools`", p)
	}
	return p
}

func runTool(t *testing.T, stdin []byte, bin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func mustTool(t *testing.T, stdin []byte, bin string, args ...string) string {
	t.Helper()
	out, stderr, err := runTool(t, stdin, bin, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr)
	}
	return out
}

// TestManifestsPassServerSideDryRun installs prometheus-operator's CRDs
// (generated from its pinned API types: hack/prometheus-operator-crds.sh)
// and dry-runs what users apply: the PrometheusRule and dashboards as
// kustomize and the chart render them.
func TestManifestsPassServerSideDryRun(t *testing.T) {
	testenv.SkipUnderShort(t, "a local cluster (kwok)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectlBin := filepath.Join(testenv.BinDir(), "kubectl")
	k := func(stdin []byte, args ...string) (string, string, error) {
		return runTool(t, stdin, kubectlBin, append([]string{"--kubeconfig", suite.Kubeconfig}, args...)...)
	}
	for _, crd := range []string{"monitoring.coreos.com_prometheusrules.yaml", "monitoring.coreos.com_servicemonitors.yaml"} {
		kubectl(t, ctx, "apply", "--server-side", "-f", repoPath("test", "testdata", "crds", crd))
	}
	if err := cluster.WaitEstablished(ctx, time.Minute, suite.Kubectl, "prometheusrules.monitoring.coreos.com", "servicemonitors.monitoring.coreos.com"); err != nil {
		t.Fatal(err)
	}
	ns := testenv.RandomName("mon-dry")
	kubectl(t, ctx, "create", "namespace", ns)
	t.Cleanup(func() { _, _ = suite.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false") })

	dryRun := func(what string, manifest []byte, objects int) {
		t.Helper()
		out, stderr, err := k(manifest, "apply", "--server-side", "--dry-run=server", "--field-manager=runbook-monitoring-test", "-n", ns, "-f", "-")
		if err != nil {
			t.Errorf("%s: the apiserver refuses it: %v\n%s", what, err, stderr)
			return
		}
		if n := strings.Count(out, "serverside-applied (server dry run)"); n != objects || strings.Contains(stderr, "Warning") {
			t.Errorf("%s: %d of %d objects applied, stderr %q:\n%s", what, n, objects, stderr, out)
		}
	}
	kustomize := tool(t, "kustomize", "KUSTOMIZE_VERSION")
	helm := tool(t, "helm", "HELM_VERSION")

	rule := []byte(strings.Replace(mustRead(t, repoPath("config", "prometheus", "prometheusrule.yaml")), "namespace: system", "namespace: "+ns, 1))
	dryRun("config/prometheus/prometheusrule.yaml", rule, 1)
	prom := strings.ReplaceAll(mustTool(t, nil, kustomize, "build", repoPath("config", "prometheus")), "namespace: system", "namespace: "+ns)
	dryRun("kustomize build config/prometheus", []byte(prom), 2)
	dryRun("kustomize build config/grafana", []byte(mustTool(t, nil, kustomize, "build", repoPath("config", "grafana"))), 4)

	enabled := []string{"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboards.enabled=true", "--set", "metrics.serviceMonitor.enabled=true"}
	mustTool(t, nil, helm, append([]string{"lint", "--strict", repoPath("charts", "runbook")}, enabled...)...)
	chart := mustTool(t, nil, helm, append([]string{"template", "ops", repoPath("charts", "runbook"), "--namespace", ns,
		"--show-only", "templates/prometheusrule.yaml", "--show-only", "templates/grafana-dashboards.yaml"}, enabled...)...)
	dryRun("the chart's PrometheusRule and dashboards", []byte(chart), 5)
	checkChartRule(t, chart)

	// Negative control: the CRD's schema is enforced (a `for` that is not a
	// Prometheus duration is refused).
	bad := strings.Replace(string(rule), "for: 10m", "for: ten minutes", 1)
	if _, stderr, err := k([]byte(bad), "apply", "--server-side", "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(stderr, "for") {
		t.Errorf("a PrometheusRule with `for: ten minutes` passed the dry-run (%v): %s", err, stderr)
	}
}

// checkChartRule: the chart's rule is config/prometheus's, with the job
// of the chart's own metrics Service.
func checkChartRule(t *testing.T, rendered string) {
	t.Helper()
	var ruleDoc string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		if strings.Contains(doc, "kind: PrometheusRule") {
			ruleDoc = doc
		}
	}
	chart := parseRule(t, []byte(ruleDoc))
	const job = `job="ops-runbook-controller-manager-metrics-service"`
	// The release's own Lease: two releases in a namespace must not share one.
	const lease = `name="ops-runbook.runbook.dev"`
	got := chart.rules()
	want := loadRules(t)
	if len(got) != len(want) {
		t.Fatalf("the chart renders %d rules, config/prometheus has %d", len(got), len(want))
	}
	for i := range want {
		w := strings.ReplaceAll(want[i].Expr, `job="`+managerJob+`"`, job)
		w = strings.ReplaceAll(w, `name="runbook.runbook.dev"`, lease)
		if got[i].Alert != want[i].Alert || got[i].Expr != w || got[i].For != want[i].For || got[i].Annotations["description"] != want[i].Annotations["description"] {
			t.Errorf("chart rule %d:\n got %+v\nwant %+v (job %s)", i, got[i], want[i], job)
		}
		if strings.Contains(want[i].Expr, "job=") && !strings.Contains(got[i].Expr, job) {
			t.Errorf("%s: the chart's expression does not select its own job %s: %s", got[i].Alert, job, got[i].Expr)
		}
		if strings.Contains(want[i].Expr, "leader_election_master_status") && !strings.Contains(got[i].Expr, lease) {
			t.Errorf("%s: the chart's expression does not select its own Lease %s: %s", got[i].Alert, lease, got[i].Expr)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
