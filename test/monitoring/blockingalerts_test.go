package monitoring

import (
	"context"
	"errors"
	"github.com/grafana/regexp"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/runbook-dev/runbook/internal/alerts"
)

// blockingRules are the alerting rules of the scenario: HighErrorRate fires
// at once, SlowBurn only after an hour (so it stays pending here).
const blockingRules = `groups:
- name: app
  rules:
  - alert: HighErrorRate
    expr: app_error_ratio > 0.5
    labels:
      severity: page
  - alert: SlowBurn
    expr: app_error_ratio > 0.1
    for: 1h
`

// realPrometheus is Prometheus's own query API (web/api/v1, the handler a
// Prometheus server serves) over a TSDB, with its rules manager's groups
// evaluated by hand into that TSDB: ALERTS series exactly as a server
// writes them.
type realPrometheus struct {
	t      *testing.T
	st     *teststorage.TestStorage
	groups map[string]*rules.Group
	url    string
}

func startRealPrometheus(t *testing.T) *realPrometheus {
	t.Helper()
	ctx := context.Background()
	st := teststorage.New(t)
	engine := newEngine()
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte(blockingRules), 0o600); err != nil {
		t.Fatal(err)
	}
	mgr := rules.NewManager(&rules.ManagerOptions{
		AppendableV2: st, Queryable: st, QueryFunc: rules.EngineQueryFunc(engine, st),
		Context: ctx, Logger: promslog.NewNopLogger(), Parser: promParser,
		// No Alertmanager: the ALERTS series are what is read here.
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
	})
	groups, errs := mgr.LoadGroups(15*time.Second, labels.EmptyLabels(), "", nil, false, file)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	// A server restores the rules' for-state from the TSDB before they
	// write ALERTS; this TSDB is new, so there is nothing to restore.
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}
	api := apiv1.NewAPI(engine, st, nil, nil, nil, nil, nil,
		func() config.Config { return config.Config{} }, map[string]string{}, apiv1.GlobalURLOptions{},
		func(f http.HandlerFunc) http.HandlerFunc { return f },
		nil, "", false, false, 0, promslog.NewNopLogger(),
		func(context.Context) apiv1.RulesRetriever { return mgr },
		0, 0, 0, false, regexp.MustCompile(".*"),
		func() (apiv1.RuntimeInfo, error) { return apiv1.RuntimeInfo{}, errors.New("not served") },
		&apiv1.PrometheusVersion{}, nil, nil, prometheus.NewRegistry(), nil, nil, false,
		remote.MessageTypes{remote.WriteV1MessageType}, false, false, false, 5*time.Minute, false, false,
		nil, nil, apiv1.OpenAPIOptions{}, promParser, false, 0)
	router := route.New().WithPrefix("/api/v1")
	api.Register(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return &realPrometheus{t: t, st: st, groups: groups, url: srv.URL}
}

// observe appends the error ratio of each namespace now and evaluates the
// rules at that moment.
func (p *realPrometheus) observe(ratios map[string]float64) {
	p.t.Helper()
	now := time.Now()
	app := p.st.Appender(context.Background())
	for ns, v := range ratios {
		if _, err := app.Append(0, labels.FromStrings("__name__", "app_error_ratio", "namespace", ns, "job", "web"), now.UnixMilli(), v); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		p.t.Fatal(err)
	}
	for _, g := range p.groups {
		g.Eval(context.Background(), now)
	}
}

// TestBlockingAlertsAgainstARealPrometheusAPI: Runbook's client and
// watcher read firing alerts per namespace from Prometheus's real query
// API: a firing alert is reported for its namespace only, a pending one is
// not, a resolved one stops being reported, and a namespace string built
// to break out of the query selects nothing.
func TestBlockingAlertsAgainstARealPrometheusAPI(t *testing.T) {
	start := time.Now()
	prom := startRealPrometheus(t)
	prom.observe(map[string]float64{"team-a": 0.9, "team-b": 0.05, "team-c": 0.3})
	setup := time.Since(start)

	c, err := alerts.NewClient(alerts.Settings{URL: prom.url})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hostile := `team-a"} or vector(1) or ALERTS{namespace="x`
	for ns, want := range map[string][]string{
		"team-a": {"HighErrorRate"}, // SlowBurn fires for it only in an hour
		"team-b": {},
		"team-c": {}, // SlowBurn pending
		"team-z": {},
		hostile:  {},
	} {
		got, err := c.Firing(ctx, ns)
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: firing %q, want %q", ns, got, want)
		}
	}
	// The query Prometheus parsed for the hostile string has one
	// namespace matcher, with that whole string as its value.
	expr, err := promParser.ParseExpr(alerts.Query(hostile))
	if err != nil {
		t.Fatal(err)
	}
	agg, ok := expr.(*parser.AggregateExpr)
	if !ok {
		t.Fatalf("%T", expr)
	}
	vs, ok := agg.Expr.(*parser.VectorSelector)
	if !ok || len(vs.LabelMatchers) != 3 {
		t.Fatalf("selector %v", agg.Expr)
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == "namespace" && (m.Value != hostile || m.Type != labels.MatchEqual) {
			t.Errorf("namespace matcher %v", m)
		}
	}

	// The watcher, as the controller uses it, on the real answers.
	w := alerts.NewWatcher(c, alerts.Settings{Interval: time.Hour}, clock.RealClock{}, nil, logr.Discard())
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = w.Start(wctx); close(done) }()
	defer func() { cancel(); <-done }()
	nn := types.NamespacedName{Namespace: "team-a", Name: "rbp"}
	w.Check(nn)
	select {
	case <-w.Events():
	case <-time.After(30 * time.Second):
		t.Fatal("no answer from the watcher")
	}
	if a, known := w.Check(nn); !known || a.Err != nil || !slices.Equal(a.Firing, []string{"HighErrorRate"}) {
		t.Fatalf("watcher: %+v %v", a, known)
	}

	// Resolved: the rules manager marks the ALERTS series stale.
	prom.observe(map[string]float64{"team-a": 0.01})
	q := time.Now()
	if got, err := c.Firing(ctx, "team-a"); err != nil || len(got) != 0 {
		t.Fatalf("after the fix: %q %v", got, err)
	}
	t.Logf("real Prometheus API: set-up (TSDB, rules, API) %s, one query %s, test %s",
		setup.Round(time.Millisecond), time.Since(q).Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
}
