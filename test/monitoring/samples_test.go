package monitoring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"testing"
)

// scrapeInterval is the time between two scrapes the tests load: Grafana's
// and the chart's ServiceMonitor default.
const scrapeInterval = 30 * time.Second

// sample is one scraped value with the labels Prometheus stores it under.
type sample struct {
	metric labels.Labels
	t      time.Time
	v      float64
}

// Target labels prometheus-operator attaches to what it scrapes through a
// ServiceMonitor: the manager (config/prometheus) and one Memcached server.
var (
	managerTarget = map[string]string{
		"job": managerJob, "namespace": "runbook-system", "service": managerJob, "endpoint": "https",
		"pod": "runbook-controller-manager-7d9f8-x2x4q", "container": "manager", "instance": "10.0.0.5:8443",
	}
	exporterTarget = map[string]string{
		"job": "cache", "namespace": "shop", "service": "cache", "endpoint": "exporter",
		"pod": "cache-6c5d7-0", "container": "exporter", "instance": "10.0.0.7:9150",
	}
)

// parseExposition reads the Prometheus text format the way a scrape does
// (Prometheus's own parser) and labels every series with the target's labels.
func parseExposition(b []byte, at time.Time, target map[string]string) ([]sample, error) {
	p := textparse.NewPromParser(b, labels.NewSymbolTable(), false)
	var out []sample
	for {
		et, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if et != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		var l labels.Labels
		p.Labels(&l)
		b := labels.NewBuilder(l)
		for k, val := range target {
			b.Set(k, val)
		}
		out = append(out, sample{metric: b.Labels(), t: at, v: v})
	}
}

// loadFixture is the three exporter scrapes (a fresh server; after
// evictions; the server stopped) one scrape interval apart from t0.
func loadFixture(t testing.TB, t0 time.Time) []sample {
	t.Helper()
	var out []sample
	for i := 1; i <= 3; i++ {
		f := filepath.Join("testdata", fmt.Sprintf("memcached-exporter-v0.15.3-scrape%d.prom", i))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseExposition(b, t0.Add(time.Duration(i-1)*scrapeInterval), exporterTarget)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, s...)
	}
	return out
}

// store loads samples into a TSDB the promql engine can query.
func store(t testing.TB, samples []sample) storage.Queryable {
	t.Helper()
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for _, s := range samples {
		if _, err := app.Append(0, s.metric, s.t.UnixMilli(), s.v); err != nil {
			t.Fatalf("append %s: %v", s.metric, err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return st
}

func newEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		Parser: promParser,
	})
}

// instant evaluates expr at ts and returns its vector (a scalar becomes one
// sample without labels).
func instant(eng *promql.Engine, q storage.Queryable, expr string, ts time.Time) (promql.Vector, error) {
	qry, err := eng.NewInstantQuery(context.Background(), q, nil, expr, ts)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V}}, nil
	default:
		return nil, fmt.Errorf("result of type %s", res.Value.Type())
	}
}

// finite counts the samples of v that are numbers (not NaN or ±Inf, which
// Grafana shows as no value).
func finite(v promql.Vector) int {
	n := 0
	for _, s := range v {
		if s.H != nil || !math.IsNaN(s.F) && !math.IsInf(s.F, 0) {
			n++
		}
	}
	return n
}
