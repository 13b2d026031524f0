package monitoring

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/runbook-dev/runbook/test/monitoring/dashboards"
)

// TestDashboardsAreGenerated: the committed JSON (config/ and the chart's
// copy) is exactly what package dashboards renders: `make dashboards`.
func TestDashboardsAreGenerated(t *testing.T) {
	const fix = "run `make dashboards` and commit config/grafana/dashboards and charts/runbook/files/dashboards"
	var want []string
	total := 0
	for _, d := range dashboards.All() {
		want = append(want, d.File)
		b, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range [][]string{{"config", "grafana", "dashboards"}, {"charts", "runbook", "files", "dashboards"}} {
			got, err := os.ReadFile(repoPath(append(dir, d.File)...))
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s differs from what package dashboards renders (%v): %s", filepath.Join(append(dir, d.File)...), err, fix)
			}
		}
		total += len(d.Panels())
		t.Logf("%s: %q, %d panels", d.File, d.Title, len(d.Panels()))
	}
	t.Logf("%d dashboards, %d panels", len(want), total)
	for _, dir := range []string{repoPath("config", "grafana", "dashboards"), repoPath("charts", "runbook", "files", "dashboards")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		var got []string
		for _, f := range files {
			got = append(got, filepath.Base(f))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v: %s", dir, got, want, fix)
		}
	}
}

// TestChartCopiesTheRule: the chart ships config/prometheus's rule.
func TestChartCopiesTheRule(t *testing.T) {
	a, err := os.ReadFile(repoPath("config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(repoPath("charts", "runbook", "files", "prometheusrule.yaml"))
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("charts/runbook/files/prometheusrule.yaml differs from config/prometheus/prometheusrule.yaml (%v): run `make manifests`", err)
	}
}

// TestEveryExpressionParses with Prometheus's parser: the rules, the
// panels' queries and the variables' selectors.
func TestEveryExpressionParses(t *testing.T) {
	qs := ruleQueries(loadRules(t))
	for _, d := range loadDashboards(t) {
		qs = append(qs, dashboardQueries(t, d, managerJob)...)
	}
	for _, q := range qs {
		if _, err := promParser.ParseExpr(q.expr); err != nil {
			t.Errorf("%s: %v\n  %s", q.where, err, q.expr)
		}
	}
	// Positive control: the parser refuses what Prometheus refuses.
	for _, bad := range []string{`rate(x[5m]`, `sum by (a) x`, `histogram_quantile(0.9, rate(x_bucket))`, `foo{job=~$job}`} {
		if _, err := promParser.ParseExpr(bad); err == nil {
			t.Errorf("the parser accepts %q", bad)
		}
	}
	t.Logf("%d expressions parse", len(qs))
}

// TestRulesAreComplete: each alert is named once, says how bad it is and
// what to do, links its section of docs/metrics.md, and selects the
// manager's series by its job (the chart rewrites that one matcher).
func TestRulesAreComplete(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		headings[githubAnchor(m[1])] = true
	}
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" || r.Record != "" {
			t.Errorf("%s: only alerting rules are shipped, got %+v", r.Group, r)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
		}
		if r.For != "" {
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		anchor := strings.ToLower(r.Alert)
		if !strings.HasSuffix(r.Annotations["runbook_url"], "docs/metrics.md#"+anchor) || !headings[anchor] {
			t.Errorf("%s: runbook_url %q must link a heading %q of docs/metrics.md", r.Alert, r.Annotations["runbook_url"], r.Alert)
		}
		vss, err := selectors(r.Expr)
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
			continue
		}
		for _, vs := range vss {
			if isExporterMetric(vs.Name) {
				continue
			}
			if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == "job" && m.Value == managerJob && m.Type == labels.MatchEqual
			}) {
				t.Errorf("%s: %s lacks job=%q", r.Alert, vs, managerJob)
			}
		}
	}
	for _, must := range []string{"RunbookRestartStorm", "RunbookProbesErroring", "RunbookTriggersPendingTooLong", "RunbookNSScalerWriteErrors",
		"RunbookNSScalerContested", "RunbookMemcachedDown", "RunbookMemcachedEvicting", "RunbookReconcileErrors"} {
		if !seen[must] {
			t.Errorf("no alert %s", must)
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = regexp.MustCompile(`[^\p{L}\p{N} _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// TestExporterSeriesAreInTheFixture: every memcached_* name the rules and
// dashboards use is exposed by memcached_exporter v0.15.3 (testdata).
func TestExporterSeriesAreInTheFixture(t *testing.T) {
	exposed := map[string]bool{}
	for _, s := range loadFixture(t, time.Unix(0, 0)) {
		exposed[s.metric.Get("__name__")] = true
	}
	qs := ruleQueries(loadRules(t))
	for _, d := range loadDashboards(t) {
		qs = append(qs, dashboardQueries(t, d, managerJob)...)
	}
	used := 0
	for _, q := range qs {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if isExporterMetric(n) {
				used++
				if !exposed[n] {
					t.Errorf("%s: memcached_exporter v0.15.3 exposes no %s", q.where, n)
				}
			}
		}
	}
	if used == 0 {
		t.Fatal("no memcached_* series used: the Memcached alerts and dashboard are missing")
	}
}
