package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/testenv"
)

// promParser is Prometheus's own PromQL parser with its default options:
// what a Prometheus server and Grafana's Prometheus data source accept.
var promParser = parser.NewParser(parser.Options{})

// managerJob is the scrape job of the manager in config/prometheus (the
// metrics Service's name, as prometheus-operator names jobs).
const managerJob = "runbook-controller-manager-metrics-service"

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, parts...)...)
}

// alertRule is one rule of the PrometheusRule.
type alertRule struct {
	Group       string            `json:"-"`
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func parseRule(t *testing.T, b []byte) prometheusRule {
	t.Helper()
	var r prometheusRule
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("PrometheusRule: %v", err)
	}
	return r
}

func (r prometheusRule) rules() []alertRule {
	var out []alertRule
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			rule.Group = g.Name
			out = append(out, rule)
		}
	}
	return out
}

func loadRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(repoPath("config", "prometheus", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := parseRule(t, b).rules()
	if len(rules) == 0 {
		t.Fatal("config/prometheus/prometheusrule.yaml has no rules")
	}
	return rules
}

// grafanaDashboard is the part of Grafana's dashboard JSON the tests read.
type grafanaDashboard struct {
	UID        string         `json:"uid"`
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	file string
}

type grafanaPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// panels are the dashboard's panels without the rows.
func (d grafanaDashboard) panels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		if p.Type != "row" {
			out = append(out, p)
		}
	}
	return out
}

// loadDashboards reads the committed JSON files (what users import).
func loadDashboards(t *testing.T) []grafanaDashboard {
	t.Helper()
	files, err := filepath.Glob(repoPath("config", "grafana", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in config/grafana/dashboards (%v)", err)
	}
	var out []grafanaDashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		d.file = filepath.Base(f)
		out = append(out, d)
	}
	return out
}

// grafanaVars is what Grafana substitutes before sending a query: the
// manager job, "All" for the other variables, and $__rate_interval as
// Grafana computes it for a 30 s scrape interval and a short range.
func grafanaVars(d grafanaDashboard, job string) map[string]string {
	vars := map[string]string{"job": job, "__rate_interval": "2m", "__range": "1h", "__interval": "30s"}
	for _, v := range d.Templating.List {
		if v.IncludeAll {
			vars[v.Name] = v.AllValue
		}
	}
	return vars
}

var varRef = regexp.MustCompile(`\$\{?(\w+)\}?`)

// substitute replaces $name and ${name}; an unknown variable is an error.
func substitute(expr string, vars map[string]string) (string, []string) {
	var unknown []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, m)
			return m
		}
		return v
	})
	return out, unknown
}

// labelValuesSelector is the series selector of a label_values(selector, label)
// variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)

// query is one PromQL expression and where it comes from.
type query struct {
	where, expr string
	// variable: a label_values selector; it must select series.
	variable bool
}

// dashboardQueries are every panel target and variable selector of d, with
// the variables substituted.
func dashboardQueries(t *testing.T, d grafanaDashboard, job string) []query {
	t.Helper()
	vars := grafanaVars(d, job)
	var out []query
	add := func(where, expr string, variable bool) {
		e, unknown := substitute(expr, vars)
		if len(unknown) > 0 {
			t.Errorf("%s: unknown variables %v in %s", where, unknown, expr)
		}
		out = append(out, query{where: where, expr: e, variable: variable})
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable %s: %q is not label_values(selector, label)", d.file, v.Name, v.Definition)
			continue
		}
		add(d.file+" variable $"+v.Name, m[1], true)
	}
	for _, p := range d.panels() {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", d.file, p.Title)
		}
		for _, tg := range p.Targets {
			add(d.file+" panel "+p.Title+" "+tg.RefID, tg.Expr, false)
		}
	}
	return out
}

// ruleQueries are the expressions of every rule.
func ruleQueries(rules []alertRule) []query {
	var out []query
	for _, r := range rules {
		out = append(out, query{where: "rule " + r.Alert, expr: r.Expr})
	}
	return out
}

// selectors parses expr and returns its vector selectors.
func selectors(expr string) ([]*parser.VectorSelector, error) {
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

// metricNames are the metric names expr selects, sorted, without repeats.
func metricNames(expr string) ([]string, error) {
	vss, err := selectors(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, vs := range vss {
		if !seen[vs.Name] {
			seen[vs.Name] = true
			out = append(out, vs.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func isExporterMetric(name string) bool { return strings.HasPrefix(name, "memcached_") }
