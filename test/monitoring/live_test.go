package monitoring

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"

	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

var suite *cluster.Suite

// TestMain starts the cluster the live tests share; under -short only the
// static tests (parsing, generated files, the exporter fixture) run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	suite, err = cluster.StartSuite(ctx, cluster.Options{Nodes: 1, NamePrefix: "monitoring"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	if _, err := suite.Kubectl(ctx, "create", "namespace", "runbook-system"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// live is the manager under test: its metrics endpoint and the probe
// targets of the scenario.
type live struct {
	mgr        *cluster.Manager
	metricsURL string
	healthPort int // an HTTP /healthz the manager may probe (--probe-allow)
	deniedPort int // a loopback port it may not (the network policy refuses it)
}

// startLive runs the real manager with plain-HTTP metrics on a free port
// (the scrape is of the same registry the HTTPS endpoint serves).
func startLive(t *testing.T, ctx context.Context) *live {
	t.Helper()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })}
	go func() { _ = srv.Serve(hl) }()
	t.Cleanup(func() { _ = srv.Close() })
	metricsPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	denied, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l := &live{metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort), healthPort: hl.Addr().(*net.TCPAddr).Port, deniedPort: denied}
	l.mgr, err = cluster.StartManager(ctx, suite.ManagerBinary, suite.Kubeconfig,
		"--operator-namespace=runbook-system",
		// As deployed: the lease and its leader_election_master_status.
		"--leader-elect", "--leader-election-namespace=runbook-system",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false",
		fmt.Sprintf("--probe-allow=127.0.0.1:%d", l.healthPort))
	if err != nil {
		t.Fatalf("starting the manager: %v", err)
	}
	t.Cleanup(func() {
		if err := l.mgr.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
		l.mgr.DumpLogsOnFailure(t.Failed())
	})
	return l
}

// scrape reads the manager's /metrics as Prometheus would and labels the
// samples as scraped through config/prometheus's ServiceMonitor at `at`.
func (l *live) scrape(t *testing.T, at time.Time) []sample {
	t.Helper()
	resp, err := http.Get(l.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", l.metricsURL, resp.StatusCode, err)
	}
	s, err := parseExposition(b, at, managerTarget)
	if err != nil {
		t.Fatalf("parsing the manager's /metrics: %v", err)
	}
	return s
}

func kubectl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := suite.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func applyYAML(t *testing.T, ctx context.Context, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, ctx, "apply", "--server-side", "-f", f)
}

func waitFor(t *testing.T, ctx context.Context, cond string, args ...string) {
	t.Helper()
	kubectl(t, ctx, append([]string{"wait", "--for=" + cond, "--timeout=180s"}, args...)...)
}

// runScenario drives every controller through what the dashboards show and
// scrapes the manager after each phase: restarts (a watched ConfigMap
// changes twice), probe results (one probe succeeds, one dials an address
// the network policy refuses), a Memcached, and an NSScaler that parks,
// restores and parks again. The scrapes are stored one scrape interval
// apart, ending at the returned time.
func runScenario(t *testing.T, ctx context.Context, l *live) (storage.Queryable, time.Time) {
	id := testenv.RandomName("mon")
	applyYAML(t, ctx, fmt.Sprintf(scenarioYAML, id, l.healthPort, l.deniedPort))
	t.Cleanup(func() {
		_, _ = suite.Kubectl(context.Background(), "delete", "nsscaler", id, "--wait=false")
		_, _ = suite.Kubectl(context.Background(), "delete", "namespace", id, id+"-p-1", "--wait=false")
	})
	rbp := []string{"-n", id}
	waitFor(t, ctx, "jsonpath={.status.policies[0].lastResult}=Success", append([]string{"rbp/on-settings"}, rbp...)...)
	waitFor(t, ctx, "jsonpath={.status.policies[?(@.name==\"upstream\")].lastResult}=Success", append([]string{"rbp/probes"}, rbp...)...)
	waitFor(t, ctx, "jsonpath={.status.policies[?(@.name==\"denied\")].lastResult}=Error", append([]string{"rbp/probes"}, rbp...)...)
	waitFor(t, ctx, "jsonpath={.status.observedGeneration}=1", append([]string{"memcached/cache"}, rbp...)...)
	waitFor(t, ctx, "jsonpath={.status.parkedWorkloads}=1", "nsscaler/"+id)

	// Before the first scrape every series the panels read exists: one
	// restart, one restore and a second park (a histogram's first
	// observation creates its series, and rate() only sees increases).
	patch := func(v string) {
		kubectl(t, ctx, "-n", id, "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"v":"`+v+`"}}`)
	}
	restart := func(v string, count int) {
		patch(v)
		waitFor(t, ctx, fmt.Sprintf("jsonpath={.status.restartCount}=%d", count), append([]string{"rbp/on-settings"}, rbp...)...)
	}
	whitelist := func(on bool) {
		if on {
			kubectl(t, ctx, "patch", "nsscaler", id, "--type=merge", "-p", `{"spec":{"whitelist":["`+id+`-p-1"]}}`)
			waitFor(t, ctx, "jsonpath={.status.parkedWorkloads}=0", "nsscaler/"+id)
			return
		}
		kubectl(t, ctx, "patch", "nsscaler", id, "--type=json", "-p", `[{"op":"remove","path":"/spec/whitelist"}]`)
		waitFor(t, ctx, "jsonpath={.status.parkedWorkloads}=1", "nsscaler/"+id)
	}
	resize := func(n int) {
		kubectl(t, ctx, "-n", id, "patch", "memcached", "cache", "--type=merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, n))
		waitFor(t, ctx, fmt.Sprintf("jsonpath={.status.replicas}=%d", n), append([]string{"memcached/cache"}, rbp...)...)
	}
	restart("2", 1)
	whitelist(true)
	whitelist(false)

	end := time.Now().Truncate(time.Second)
	start := end.Add(-2 * scrapeInterval)
	samples := l.scrape(t, start)
	restart("3", 2)
	whitelist(true)
	resize(2)
	samples = append(samples, l.scrape(t, start.Add(scrapeInterval))...)
	restart("4", 3)
	whitelist(false)
	resize(1)
	samples = append(samples, l.scrape(t, end)...)

	return store(t, append(samples, loadFixture(t, start)...)), end
}

// exposedNames are the metric names of the samples.
func exposedNames(samples []sample) map[string]bool {
	out := map[string]bool{}
	for _, s := range samples {
		out[s.metric.Get("__name__")] = true
	}
	return out
}

// TestAgainstTheLiveManager scrapes the real manager and checks the alerts
// and dashboards against what it exposes, with Prometheus's engine.
func TestAgainstTheLiveManager(t *testing.T) {
	testenv.SkipUnderShort(t, "a local cluster (kwok) and the manager binary")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := startLive(t, ctx)
	db, at := runScenario(t, ctx, l)
	managerNames := exposedNames(l.scrape(t, at))
	fixtureNames := exposedNames(loadFixture(t, at))

	rules := loadRules(t)
	qs := ruleQueries(rules)
	for _, d := range loadDashboards(t) {
		qs = append(qs, dashboardQueries(t, d, managerJob)...)
	}

	t.Run("every series named is exposed", func(t *testing.T) {
		used := map[string]bool{}
		for _, q := range qs {
			names, err := metricNames(q.expr)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			for _, n := range names {
				used[n] = true
				switch {
				case isExporterMetric(n) && !fixtureNames[n]:
					t.Errorf("%s: memcached_exporter v0.15.3 exposes no %s", q.where, n)
				case !isExporterMetric(n) && !managerNames[n]:
					t.Errorf("%s: the manager exposes no %s", q.where, n)
				}
			}
		}
		// Positive control: the check knows a name that does not exist.
		if managerNames["runbook_rebootpolicy_restarts"] || !managerNames["runbook_rebootpolicy_restarts_total"] {
			t.Error("positive control: the scrape should hold runbook_rebootpolicy_restarts_total and nothing named runbook_rebootpolicy_restarts")
		}
		t.Logf("%d expressions use %d series names", len(qs), len(used))
	})

	eng := newEngine()
	t.Run("every panel and variable returns data", func(t *testing.T) {
		for _, q := range qs {
			if strings.HasPrefix(q.where, "rule ") {
				continue
			}
			v, err := instant(eng, db, q.expr, at)
			switch {
			case err != nil:
				t.Errorf("%s: %v\n  %s", q.where, err, q.expr)
			case finite(v) == 0:
				t.Errorf("%s: no data (%d samples, none a number)\n  %s", q.where, len(v), q.expr)
			}
		}
	})

	t.Run("positive control: a query of nothing has no data", func(t *testing.T) {
		if v, err := instant(eng, db, `sum(rate(runbook_rebootpolicy_restarts_total{outcome="exploded"}[2m]))`, at); err != nil || finite(v) != 0 {
			t.Errorf("%v %v", v, err)
		}
	})

	t.Run("the alerts the scenario provokes fire, the others do not", func(t *testing.T) {
		firing := map[string]bool{}
		for _, r := range rules {
			v, err := instant(eng, db, r.Expr, at)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			firing[r.Alert] = len(v) > 0
		}
		// The denied probe errors every time; the fixture's server evicts
		// (scrape 2) and then stops (scrape 3).
		want := []string{"RunbookProbesErroring", "RunbookProbeDialsDenied", "RunbookMemcachedDown", "RunbookMemcachedEvicting"}
		for name, f := range firing {
			if f != slices.Contains(want, name) {
				t.Errorf("%s: firing=%v, want %v", name, f, !f)
			}
		}
	})
}

// scenarioYAML: %[1]s names the namespace, the NSScaler and its prefix;
// %[2]d is the allowed health port, %[3]d the refused one.
const scenarioYAML = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s-p-1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {v: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: on-settings, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: web}
  minRestartInterval: 0s
  policies:
  - name: settings
    trigger: {watch: {kind: ConfigMap, name: settings, periodSeconds: 1}}
---
apiVersion: autoreboot.runbook.dev/v1alpha1
kind: RebootPolicy
metadata: {name: probes, namespace: %[1]s}
spec:
  target: {kind: Deployment, name: web}
  policies:
  - name: upstream
    trigger: {probe: {httpGet: {host: 127.0.0.1, port: %[2]d, path: /healthz}, periodSeconds: 1}}
  - name: denied
    trigger: {probe: {tcpSocket: {host: 127.0.0.1, port: %[3]d}, periodSeconds: 1}}
---
apiVersion: cache.runbook.dev/v1alpha1
kind: Memcached
metadata: {name: cache, namespace: %[1]s}
spec: {size: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %[1]s-p-1}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27}]}
---
apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: %[1]s}
spec:
  namespacePrefix: %[1]s-p-
`
