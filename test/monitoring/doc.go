// Package monitoring tests Runbook's alerts (config/prometheus/prometheusrule.yaml)
// and Grafana dashboards (config/grafana/dashboards, rendered from package
// dashboards) with Prometheus's own code: every expression parses with the
// PromQL parser, names only series the manager exposes (scraped live from the
// real manager binary on a local cluster) or the memcached exporter exposes
// (testdata/: scrapes of memcached_exporter v0.15.3, the version the Memcached
// controller deploys), every panel's queries return data when the promql
// engine evaluates them on those scrapes, the alerts fire where the scenario
// says they must, and the PrometheusRule passes a server-side dry-run against
// prometheus-operator's real CRD.
//
// This is a module of its own (github.com/prometheus/prometheus has a large
// dependency graph the operator does not need); `make test` runs it.
package monitoring
