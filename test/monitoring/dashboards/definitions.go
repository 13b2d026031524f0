package dashboards

import "strings"

// All are Runbook's dashboards: an overview and one per controller.
func All() []Dashboard {
	return []Dashboard{overview(), rebootPolicy(), memcached(), nsscaler()}
}

// mgr is the selector of the manager's own series: its scrape job.
const mgr = `job=~"$job"`

// controllers matches the three controllers' names in controller-runtime's
// metrics (other operators scraped by the same Prometheus have their own).
const controllers = `controller=~"rebootpolicy|memcached|nsscaler"`

// jobVar picks the manager's scrape job: the jobs that expose Runbook's
// leader-election lease.
var jobVar = Variable{Name: "job", Label: "Manager job", Query: `leader_election_master_status{name="runbook.runbook.dev"}`, Field: "job"}

func ts(title, unit, desc string, targets ...Target) Panel {
	return Panel{Type: TimeSeries, Title: title, Unit: unit, Description: desc, Targets: targets}
}

func wide(p Panel) Panel { p.Width = 12; return p }

func stat(title, unit, desc, expr string) Panel {
	return Panel{Type: Stat, Title: title, Unit: unit, Description: desc, Targets: []Target{{Expr: expr}}}
}

func q(expr, legend string) Target { return Target{Expr: expr, Legend: legend} }

// sel fills {SEL} in a template with the given matchers.
func sel(tmpl string, matchers ...string) string {
	return strings.ReplaceAll(tmpl, "{SEL}", "{"+strings.Join(matchers, ",")+"}")
}

func rate(metric string, by string, matchers ...string) string {
	return sel("sum by ("+by+") (rate("+metric+"{SEL}[$__rate_interval]))", matchers...)
}

func quantile(phi, metric, by string, matchers ...string) string {
	group := "le"
	if by != "" {
		group = by + ", le"
	}
	return sel("histogram_quantile("+phi+", sum by ("+group+") (rate("+metric+"_bucket{SEL}[$__rate_interval])))", matchers...)
}

// controllerRow is the controller-runtime view of one controller.
func controllerRow(name string) Row {
	c := `controller="` + name + `"`
	return Row{Title: "Controller", Panels: []Panel{
		ts("Reconciles by result", "ops", "Reconciles per second of the "+name+" controller by outcome (success, error, requeue, requeue_after).",
			q(rate("controller_runtime_reconcile_total", "result", mgr, c), "{{result}}")),
		ts("Reconcile duration", "s", "How long one reconcile takes (p50 and p99).",
			q(quantile("0.5", "controller_runtime_reconcile_time_seconds", "", mgr, c), "p50"),
			q(quantile("0.99", "controller_runtime_reconcile_time_seconds", "", mgr, c), "p99")),
		ts("Work queue", "short", "Objects waiting to be reconciled, and requeues with back-off (errors, conflicts) per second.",
			q(sel("sum(workqueue_depth{SEL})", mgr, c), "depth"),
			q(rate("workqueue_retries_total", "controller", mgr, c), "retries/s")),
	}}
}

func overview() Dashboard {
	return Dashboard{
		File: "runbook-overview.json", UID: "runbook-overview", Title: "Runbook / Overview",
		Description: "The Runbook manager at a glance: leadership, the three controllers' reconciles, restarts, parked namespaces and Memcached instances.",
		Vars:        []Variable{jobVar},
		Rows: []Row{
			{Title: "At a glance", Panels: []Panel{
				stat("Leader", "short", "1 when a manager replica holds the lease runbook.runbook.dev; 0 means nothing reconciles.",
					sel(`max(leader_election_master_status{SEL})`, mgr, `name="runbook.runbook.dev"`)),
				stat("Replicas", "short", "Manager replicas scraped.", sel(`count(leader_election_master_status{SEL})`, mgr, `name="runbook.runbook.dev"`)),
				stat("Reconcile errors (1h)", "short", "Reconciles of all three controllers that returned an error in the last hour.",
					sel(`sum(increase(controller_runtime_reconcile_errors_total{SEL}[1h]))`, mgr, controllers)),
				stat("Restarts (1h)", "short", "Workloads RebootPolicies restarted in the last hour.",
					sel(`sum(increase(runbook_rebootpolicy_restarts_total{SEL}[1h])) or vector(0)`, mgr, `outcome="restarted"`)),
				stat("Parked namespaces", "short", "Namespaces the NSScalers hold parked now.", sel(`sum(runbook_nsscaler_parked_namespaces{SEL}) or vector(0)`, mgr)),
				stat("Memcached instances up", "short", "Memcached instances whose exporter reaches memcached (spec.exporter).", `sum(memcached_up) or vector(0)`),
			}},
			{Title: "Controllers", Panels: []Panel{
				ts("Reconciles", "ops", "Reconciles per second by controller.", q(rate("controller_runtime_reconcile_total", "controller", mgr, controllers), "{{controller}}")),
				ts("Reconcile errors", "ops", "Reconciles per second that returned an error, by controller.",
					q(rate("controller_runtime_reconcile_errors_total", "controller", mgr, controllers), "{{controller}}")),
				ts("Reconcile duration p99", "s", "99th percentile of one reconcile's duration, by controller.",
					q(quantile("0.99", "controller_runtime_reconcile_time_seconds", "controller", mgr, controllers), "{{controller}}")),
				ts("Work queue depth", "short", "Objects waiting to be reconciled, by controller.",
					q(sel(`sum by (controller) (workqueue_depth{SEL})`, mgr, controllers), "{{controller}}")),
				ts("API requests by code", "reqps", "Requests from the manager to the apiserver by HTTP status code (429: throttled).",
					q(rate("rest_client_requests_total", "code", mgr), "{{code}}")),
				ts("API rate-limit wait p99", "s", "99th percentile of the time a request waits in the manager's own rate limiter (--kube-api-qps, --kube-api-burst) before it is sent, by verb.",
					q(quantile("0.99", "rest_client_rate_limiter_duration_seconds", "verb", mgr), "{{verb}}")),
				ts("Restarts and parks", "short", "Workloads restarted by RebootPolicies and parked by NSScalers per interval.",
					q(sel(`sum(increase(runbook_rebootpolicy_restarts_total{SEL}[$__rate_interval]))`, mgr, `outcome="restarted"`), "restarted"),
					q(sel(`sum(increase(runbook_nsscaler_writes_total{SEL}[$__rate_interval]))`, mgr, `operation="park"`, `result="ok"`), "parked")),
			}},
			{Title: "Process", Panels: []Panel{
				ts("Memory", "bytes", "Resident memory and Go heap in use of each replica (mostly informer cache).",
					q(sel(`process_resident_memory_bytes{SEL}`, mgr), "resident {{pod}}"),
					q(sel(`go_memstats_heap_inuse_bytes{SEL}`, mgr), "heap {{pod}}")),
				ts("CPU", "short", "CPU cores used by each replica.", q(sel(`rate(process_cpu_seconds_total{SEL}[$__rate_interval])`, mgr), "{{pod}}")),
				ts("Goroutines", "short", "Goroutines of each replica (probe workers run one each).", q(sel(`go_goroutines{SEL}`, mgr), "{{pod}}")),
			}},
		},
	}
}

func rebootPolicy() Dashboard {
	probes := "runbook_rebootpolicy_probe_results_total"
	return Dashboard{
		File: "runbook-rebootpolicy.json", UID: "runbook-rebootpolicy", Title: "Runbook / RebootPolicy",
		Description: "RebootPolicy: probe, query and watch results, triggers fired, restarts and their latency.",
		Vars:        []Variable{jobVar},
		Rows: []Row{
			{Title: "Probes", Panels: []Panel{
				ts("Results by type and result", "ops", "Probe, query and watch results per second (Success, Failure, Error) by trigger type.",
					q(rate(probes, "type, result", mgr), "{{type}} {{result}}")),
				ts("Error ratio by type", "percentunit", "Share of results that are Error (the trigger could not be evaluated: it cannot fire).",
					q("("+rate(probes, "type", mgr, `result="Error"`)+" or 0 * "+rate(probes, "type", mgr)+") / "+rate(probes, "type", mgr), "{{type}}")),
				ts("Probe duration p99", "s", "99th percentile of one probe, query or watch read, by type.",
					q(quantile("0.99", "runbook_rebootpolicy_probe_duration_seconds", "type", mgr), "{{type}}")),
				ts("Schedule drift p99", "s", "How late probes start compared with their period (a busy manager starts them late).",
					q(quantile("0.99", "runbook_rebootpolicy_probe_schedule_drift_seconds", "type", mgr), "{{type}}")),
				ts("Dials refused by the network policy", "ops", "Probe connections the manager's network policy refused, by the rule that refused them.",
					q(rate("runbook_probe_dials_denied_total", "category", mgr), "{{category}}")),
			}},
			{Title: "Triggers and restarts", Panels: []Panel{
				stat("Restarts (24h)", "short", "Workloads restarted in the last 24 hours.",
					sel(`sum(increase(runbook_rebootpolicy_restarts_total{SEL}[24h])) or vector(0)`, mgr, `outcome="restarted"`)),
				stat("Triggers fired (24h)", "short", "Times a policy's trigger fired in the last 24 hours.",
					sel(`sum(increase(runbook_rebootpolicy_triggers_total{SEL}[24h])) or vector(0)`, mgr)),
				ts("Triggers fired by type", "short", "Times a trigger fired per interval, by trigger type.",
					q(sel(`sum by (type) (increase(runbook_rebootpolicy_triggers_total{SEL}[$__rate_interval]))`, mgr), "{{type}}")),
				ts("Restarts by kind and outcome", "short", "Target restarts per interval: restarted, skipped (paused or OnDelete), failed.",
					q(sel(`sum by (kind, outcome) (increase(runbook_rebootpolicy_restarts_total{SEL}[$__rate_interval]))`, mgr), "{{kind}} {{outcome}}")),
				ts("Restarts waiting and rolling out", "short", "Targets whose restart waits (settle delay, window, throttle, cooldown, rollout) and restarts whose rollout has not finished (--max-concurrent-restarts bounds them).",
					q(sel(`sum(runbook_rebootpolicy_pending_restarts{SEL})`, mgr), "pending"),
					q(sel(`sum(runbook_rebootpolicy_restarts_in_progress{SEL})`, mgr), "in progress")),
				ts("Restart requests by hand", "short", "Restart requests (kubectl runbook restart, the restart-request annotation) taken per interval.",
					q(sel(`sum(increase(runbook_rebootpolicy_restart_requests_total{SEL}[$__rate_interval]))`, mgr), "requests")),
				ts("Trigger to restart latency", "s", "Time from a trigger firing to the restart patch (cooldown and rollout waits included).",
					q(quantile("0.5", "runbook_rebootpolicy_restart_latency_seconds", "", mgr), "p50"),
					q(quantile("0.99", "runbook_rebootpolicy_restart_latency_seconds", "", mgr), "p99")),
			}},
			controllerRow("rebootpolicy"),
		},
	}
}

func memcached() Dashboard {
	mc := []string{`namespace=~"$namespace"`, `service=~"$memcached"`}
	with := func(extra ...string) []string { return append(append([]string{}, mc...), extra...) }
	gets := func(by string, extra ...string) string {
		return sel("sum"+by+" (rate(memcached_commands_total{SEL}[$__rate_interval]))", with(append([]string{`command="get"`}, extra...)...)...)
	}
	return Dashboard{
		File: "runbook-memcached.json", UID: "runbook-memcached", Title: "Runbook / Memcached",
		Description: "Memcached: the controller, and the servers as their exporter sidecars (spec.exporter) report them.",
		Vars: []Variable{jobVar,
			{Name: "namespace", Label: "Namespace", Query: `memcached_up`, Field: "namespace", All: true},
			{Name: "memcached", Label: "Memcached", Query: `memcached_up{namespace=~"$namespace"}`, Field: "service", All: true}},
		Rows: []Row{
			{Title: "Servers", Panels: []Panel{
				stat("Instances up", "short", "Instances whose exporter reaches memcached.", sel(`sum(memcached_up{SEL})`, mc...)),
				stat("Instances down", "short", "Instances whose exporter cannot reach memcached.", sel(`count(memcached_up{SEL} == 0) or vector(0)`, mc...)),
				stat("Get hit ratio", "percentunit", "Share of gets that found their key.", gets("", `status="hit"`)+" / "+gets("")),
				stat("Memory used", "percentunit", "Bytes stored over the memory limit (spec.memoryMiB), all instances.",
					sel(`sum(memcached_current_bytes{SEL})`, mc...)+" / "+sel(`sum(memcached_limit_bytes{SEL})`, mc...)),
				wide(ts("Up by instance", "short", "1 when the exporter beside the pod reaches memcached.",
					q(sel(`max by (namespace, pod) (memcached_up{SEL})`, mc...), "{{namespace}}/{{pod}}"))),
			}},
			{Title: "Traffic", Panels: []Panel{
				ts("Commands", "ops", "Commands per second by command and status.",
					q(rate("memcached_commands_total", "command, status", mc...), "{{command}} {{status}}")),
				ts("Get hit ratio by Memcached", "percentunit", "Share of gets that found their key.",
					q(gets(" by (namespace, service)", `status="hit"`)+" / "+gets(" by (namespace, service)"), "{{namespace}}/{{service}}")),
				ts("Network", "Bps", "Bytes per second read from and written to clients.",
					q(rate("memcached_read_bytes_total", "namespace, service", mc...), "read {{namespace}}/{{service}}"),
					q(rate("memcached_written_bytes_total", "namespace, service", mc...), "written {{namespace}}/{{service}}")),
			}},
			{Title: "Memory and evictions", Panels: []Panel{
				ts("Evictions", "ops", "Items that had not expired removed to make room per second: the cache is too small when this is high.",
					q(rate("memcached_items_evicted_total", "namespace, service", mc...), "{{namespace}}/{{service}}")),
				ts("Memory used and limit", "bytes", "Bytes stored and the memory limit, by Memcached.",
					q(sel(`sum by (namespace, service) (memcached_current_bytes{SEL})`, mc...), "used {{namespace}}/{{service}}"),
					q(sel(`sum by (namespace, service) (memcached_limit_bytes{SEL})`, mc...), "limit {{namespace}}/{{service}}")),
				ts("Items", "short", "Items stored now, by Memcached.",
					q(sel(`sum by (namespace, service) (memcached_current_items{SEL})`, mc...), "{{namespace}}/{{service}}")),
			}},
			{Title: "Connections", Panels: []Panel{
				wide(ts("Connections and limit", "short", "Open connections and the limit (spec.maxConnections), by instance.",
					q(sel(`max by (namespace, pod) (memcached_current_connections{SEL})`, mc...), "open {{namespace}}/{{pod}}"),
					q(sel(`max by (namespace, pod) (memcached_max_connections{SEL})`, mc...), "limit {{namespace}}/{{pod}}"))),
				wide(ts("Rejected connections", "ops", "Connections refused per second because the limit was reached.",
					q(rate("memcached_connections_rejected_total", "namespace, service", mc...), "{{namespace}}/{{service}}"))),
			}},
			controllerRow("memcached"),
		},
	}
}

func nsscaler() Dashboard {
	n := `nsscaler=~"$nsscaler"`
	return Dashboard{
		File: "runbook-nsscaler.json", UID: "runbook-nsscaler", Title: "Runbook / NSScaler",
		Description: "NSScaler: namespaces and workloads held parked, pods remaining, what parking saved, the park and restore writes.",
		Vars: []Variable{jobVar,
			{Name: "nsscaler", Label: "NSScaler", Query: `runbook_nsscaler_parked_namespaces{job=~"$job"}`, Field: "nsscaler", All: true}},
		Rows: []Row{
			{Title: "Parking", Panels: []Panel{
				stat("Parked namespaces", "short", "Namespaces held parked now.", sel(`sum(runbook_nsscaler_parked_namespaces{SEL})`, mgr, n)),
				stat("Parked workloads", "short", "Workloads held parked (original recorded).", sel(`sum(runbook_nsscaler_parked_workloads{SEL})`, mgr, n)),
				stat("Pods remaining", "short", "Pods still present in parked namespaces.", sel(`sum(runbook_nsscaler_pods_remaining{SEL})`, mgr, n)),
				stat("Write errors (1h)", "short", "Park and restore writes that failed in the last hour.",
					sel(`sum(increase(runbook_nsscaler_writes_total{SEL}[1h])) or vector(0)`, mgr, n, `result="error"`)),
				ts("Parked namespaces by NSScaler", "short", "", q(sel(`sum by (nsscaler) (runbook_nsscaler_parked_namespaces{SEL})`, mgr, n), "{{nsscaler}}")),
				ts("Parked workloads by NSScaler", "short", "", q(sel(`sum by (nsscaler) (runbook_nsscaler_parked_workloads{SEL})`, mgr, n), "{{nsscaler}}")),
				ts("Pods remaining by NSScaler", "short", "Pods in parked namespaces; they should drain within the pods' grace period.",
					q(sel(`sum by (nsscaler) (runbook_nsscaler_pods_remaining{SEL})`, mgr, n), "{{nsscaler}}")),
			}},
			{Title: "Savings", Panels: []Panel{
				stat("Pod-hours saved (24h)", "short", "Pod-hours parked Deployments and StatefulSets did not run in the last 24 hours (docs/nsscaler.md#savings).",
					sel(`sum(increase(runbook_nsscaler_saved_pod_hours_total{SEL}[24h])) or vector(0)`, mgr, n)),
				stat("CPU core-hours saved (24h)", "short", "Requested CPU core-hours not run in the last 24 hours.",
					sel(`sum(increase(runbook_nsscaler_saved_cpu_core_hours_total{SEL}[24h])) or vector(0)`, mgr, n)),
				stat("Memory GiB-hours saved (24h)", "short", "Requested memory GiB-hours not run in the last 24 hours.",
					sel(`sum(increase(runbook_nsscaler_saved_memory_gib_hours_total{SEL}[24h])) or vector(0)`, mgr, n)),
				ts("CPU cores parked by namespace", "short", "Requested CPU cores not running now because parked (core-hours saved per hour).",
					q(sel(`sum by (nsscaler, namespace) (rate(runbook_nsscaler_saved_cpu_core_hours_total{SEL}[$__rate_interval])) * 3600`, mgr, n), "{{nsscaler}} {{namespace}}")),
				ts("Saved per day by NSScaler", "short", "Requested CPU core-hours and pod-hours not run in the 24 hours before each point (kubectl runbook savings --since 1d sums whole UTC days instead).",
					q(sel(`sum by (nsscaler) (increase(runbook_nsscaler_saved_cpu_core_hours_total{SEL}[1d]))`, mgr, n), "{{nsscaler}} core-hours"),
					q(sel(`sum by (nsscaler) (increase(runbook_nsscaler_saved_pod_hours_total{SEL}[1d]))`, mgr, n), "{{nsscaler}} pod-hours")),
			}},
			{Title: "Writes", Panels: []Panel{
				ts("Workload writes", "ops", "Park and restore writes per second by result (ok, conflict, error).",
					q(rate("runbook_nsscaler_writes_total", "operation, result", mgr, n), "{{operation}} {{result}}")),
				ts("Park duration", "s", "Wall time of the park writes of one reconcile pass (p50, p99).",
					q(quantile("0.5", "runbook_nsscaler_park_duration_seconds", "", mgr, n), "p50"),
					q(quantile("0.99", "runbook_nsscaler_park_duration_seconds", "", mgr, n), "p99")),
				ts("Restore duration", "s", "Wall time of the restore writes of one reconcile pass (p50, p99).",
					q(quantile("0.5", "runbook_nsscaler_restore_duration_seconds", "", mgr, n), "p50"),
					q(quantile("0.99", "runbook_nsscaler_restore_duration_seconds", "", mgr, n), "p99")),
			}},
			controllerRow("nsscaler"),
		},
	}
}
