package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"time"
	// Restart windows name IANA time zones; the image has no zoneinfo.
	_ "time/tzdata"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"

	"github.com/runbook-dev/runbook/internal/alerts"
	rebootpolicy "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/notify"
	"github.com/runbook-dev/runbook/internal/probe"
	"github.com/runbook-dev/runbook/internal/registry"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// registerRebootPolicy: RebootPolicies (autoreboot.runbook.dev) restart
// workloads on triggers, see docs/rebootpolicy.md.
func registerRebootPolicy(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet, shared sharedFlags) {
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	flags := bindRebootPolicyFlags(fs)
	compat := bindReloaderCompatFlags(fs)
	reg.Add(rebootpolicy.Name, func(mgr ctrl.Manager) error {
		opts, err := flags.options(*shared.operatorNamespace)
		if err != nil {
			return err
		}
		if opts.EventBudget, err = shared.eventBudget(); err != nil {
			return err
		}
		// The ConfigMap watch of referenced triggers covers what the
		// manager's cache covers (the manager's own flag, parsed by now).
		if f := fs.Lookup("watch-namespaces"); f != nil {
			opts.Namespaces = splitList(f.Value.String())
		}
		if err := opts.Metrics.Register(crmetrics.Registry); err != nil {
			return err
		}
		if _, err = rebootpolicy.Setup(mgr, opts); err != nil {
			return err
		}
		return setupReloaderCompat(mgr, compat, opts.Namespaces, opts.EventBudget)
	})
}

// rebootPolicyFlags are the admin's settings of the RebootPolicy
// controller: what tenants' probes may reach and how much they may cost.
type rebootPolicyFlags struct {
	execProbeDir    *string
	allowLinkLocal  *bool
	probeAllow      *string
	probeDeny       *string
	unixSockets     *string
	podCIDRs        *string
	minPeriod       *time.Duration
	maxPerNamespace *int
	sqlMaxRows      *int
	sqlMaxRowBytes  *int
	sqlMaxResult    *int
	sqlPowerful     *bool
	fingerprintKey  *string
	workers         *int
	// Referenced triggers, restart governance and notifications.
	maxRestarts        *int
	secretsNoLabel     *bool
	watchSecrets       *bool
	refMaxTargets      *int
	refMaxPerTarget    *int
	refMaxPerPolicy    *int
	notifyQueue        *int
	notifyPerNamespace *int
	notifyAttempts     *int
	// The admin's Prometheus for spec.blockingAlerts.
	prometheusURL      *string
	prometheusToken    *string
	prometheusCA       *string
	prometheusInterval *time.Duration
}

func bindRebootPolicyFlags(fs *flag.FlagSet) *rebootPolicyFlags {
	return &rebootPolicyFlags{
		execProbeDir: fs.String("exec-probe-dir", "",
			"Directory of scripts that RebootPolicy exec probes may run; empty disables exec probes."),
		allowLinkLocal: fs.Bool("allow-link-local-probes", false,
			"Allow RebootPolicy probes to link-local addresses (169.254.0.0/16, fe80::/10); cloud metadata endpoints stay refused unless --probe-allow names them."),
		probeAllow: fs.String("probe-allow", "",
			"Comma-separated addresses RebootPolicy probes and SQL connections may reach although the built-in policy refuses them: CIDR or IP, each optionally with :port (e.g. 127.0.0.1:3306,[::1]:5432,10.0.0.0/8:443)."),
		probeDeny: fs.String("probe-deny", "",
			"Comma-separated addresses (same syntax as --probe-allow) RebootPolicy probes and SQL connections may never reach; wins over --probe-allow."),
		unixSockets: fs.String("probe-allow-unix-sockets", "",
			"Comma-separated database socket paths (MySQL socket file, PostgreSQL socket directory) sql triggers may use; none by default."),
		podCIDRs: fs.String("cluster-pod-cidrs", "",
			"Comma-separated pod CIDRs of the cluster; when set, only addresses inside them are looked up as pod IPs (saves an apiserver list per new probe address)."),
		minPeriod: fs.Duration("probe-min-period", time.Second,
			"Shortest period a RebootPolicy probe, query or watch may run at; faster policies do not run (PeriodBelowMinimum)."),
		maxPerNamespace: fs.Int("probe-max-per-namespace", 100,
			"Most RebootPolicy policies (probe workers) running in one namespace, oldest first; 0 means no limit."),
		sqlMaxRows: fs.Int("sql-max-rows", sqlguard.DefaultMaxRows, "Most rows an sql trigger's result may have."),
		sqlMaxRowBytes: fs.Int("sql-max-row-bytes", sqlguard.DefaultMaxRowBytes,
			"Most bytes one row of an sql trigger's result may have."),
		sqlMaxResult: fs.Int("sql-max-result-bytes", sqlguard.DefaultMaxResultBytes,
			"Most bytes an sql trigger's whole result may have."),
		sqlPowerful: fs.Bool("sql-allow-powerful-users", false,
			"Let sql triggers use DSNs whose user may act outside the database's own data (superuser, server files or programs, FILE, SUPER, PROCESS, write privileges); refused as DSNTooPowerful otherwise."),
		fingerprintKey: fs.String("fingerprint-key-secret", fingerprint.DefaultSecretName,
			"Secret in --operator-namespace holding the key of RebootPolicy fingerprints (created if missing)."),
		workers: fs.Int("rebootpolicy-max-concurrent-reconciles", rebootpolicy.DefaultMaxConcurrentReconciles,
			"RebootPolicies the rebootpolicy controller reconciles in parallel (probes run in their own workers regardless)."),
		maxRestarts: fs.Int("max-concurrent-restarts", 0,
			"Most RebootPolicy restarts in progress at once, over all RebootPolicies (from the patch until the target is available again); 0 means no limit."),
		secretsNoLabel: fs.Bool("referenced-secrets-without-label", false,
			"Let referenced triggers track Secrets without the autoreboot.runbook.dev/usable label (only when whoever may create RebootPolicies may also read the namespace's Secrets)."),
		watchSecrets: fs.Bool("watch-referenced-secrets", false,
			"Watch Secret metadata for referenced triggers instead of polling each referenced Secret every period; needs list and watch on secrets (not in the default RBAC)."),
		refMaxTargets: fs.Int("referenced-max-targets", 256, "Most workloads one referenced trigger tracks."),
		refMaxPerTarget: fs.Int("referenced-max-objects-per-target", 32,
			"Most ConfigMaps and Secrets one workload may reference for a referenced trigger."),
		refMaxPerPolicy: fs.Int("referenced-max-objects-per-policy", 128,
			"Most distinct ConfigMaps and Secrets one referenced trigger tracks over all its targets."),
		notifyQueue: fs.Int("notify-queue-size", 512, "Most webhook notifications waiting to be sent, manager-wide; more are dropped."),
		notifyPerNamespace: fs.Int("notify-queue-per-namespace", 32,
			"Most webhook notifications of one namespace waiting to be sent; more are dropped."),
		notifyAttempts: fs.Int("notify-attempts", 5, "Attempts per webhook notification (back-off from 1s, doubling, up to 1m)."),
		prometheusURL: fs.String("prometheus-url", "",
			"Prometheus HTTP API that RebootPolicies' spec.blockingAlerts are checked against (e.g. http://prometheus-k8s.monitoring.svc:9090); empty: such policies hold their restarts (AlertsNotConfigured)."),
		prometheusToken: fs.String("prometheus-bearer-token-file", "",
			"File with a bearer token for --prometheus-url, read before each query (e.g. the manager's projected service-account token)."),
		prometheusCA: fs.String("prometheus-ca-file", "",
			"PEM CA bundle an https --prometheus-url's certificate must chain to (default: the system's)."),
		prometheusInterval: fs.Duration("prometheus-interval", alerts.DefaultInterval,
			"How often the firing alerts of a namespace are asked for while a RebootPolicy there has a restart held by spec.blockingAlerts (one query per namespace)."),
	}
}

// options turns the flags into the controller's options.
func (f *rebootPolicyFlags) options(operatorNamespace string) (rebootpolicy.Options, error) {
	network, err := f.network()
	if err != nil {
		return rebootpolicy.Options{}, err
	}
	return rebootpolicy.Options{
		Probes: probe.Settings{
			ExecProbeDir:         *f.execProbeDir,
			OperatorNamespace:    operatorNamespace,
			FingerprintKeySecret: *f.fingerprintKey,
			SQL: probe.SQLSettings{
				Limits:           sqlguard.Limits{MaxRows: *f.sqlMaxRows, MaxRowBytes: *f.sqlMaxRowBytes, MaxResultBytes: *f.sqlMaxResult},
				AllowUnixSockets: network.AllowUnixSockets,
				AllowPowerful:    *f.sqlPowerful,
			},
			Referenced: probe.ReferencedSettings{
				SecretsWithoutLabel: *f.secretsNoLabel, WatchSecrets: *f.watchSecrets,
				MaxTargets: *f.refMaxTargets, MaxPerTarget: *f.refMaxPerTarget, MaxPerPolicy: *f.refMaxPerPolicy,
			},
		},
		Network:                 network,
		Limits:                  rebootpolicy.Limits{MinPeriod: *f.minPeriod, MaxPerNamespace: *f.maxPerNamespace},
		Clock:                   clock.RealClock{},
		Metrics:                 rebootpolicy.NewMetrics(),
		MaxConcurrentReconciles: *f.workers,
		// One throttle for every RebootPolicy of this manager.
		Throttle: rebootpolicy.NewThrottle(*f.maxRestarts, clock.RealClock{}),
		Notify: notify.Settings{
			QueueSize: *f.notifyQueue, PerNamespace: *f.notifyPerNamespace, Attempts: *f.notifyAttempts,
		},
		Alerts: alerts.Settings{
			URL: *f.prometheusURL, BearerTokenFile: *f.prometheusToken, CAFile: *f.prometheusCA, Interval: *f.prometheusInterval,
		},
	}, nil
}

func (f *rebootPolicyFlags) network() (egress.Settings, error) {
	allow, err := egress.ParseRules(*f.probeAllow)
	if err != nil {
		return egress.Settings{}, fmt.Errorf("--probe-allow: %w", err)
	}
	deny, err := egress.ParseRules(*f.probeDeny)
	if err != nil {
		return egress.Settings{}, fmt.Errorf("--probe-deny: %w", err)
	}
	pods, err := parsePrefixes(*f.podCIDRs)
	if err != nil {
		return egress.Settings{}, fmt.Errorf("--cluster-pod-cidrs: %w", err)
	}
	self, err := egress.LocalAddrs()
	if err != nil {
		return egress.Settings{}, fmt.Errorf("reading the manager's own addresses: %w", err)
	}
	return egress.Settings{
		Allow: allow, Deny: deny, AllowLinkLocal: *f.allowLinkLocal,
		AllowUnixSockets: splitList(*f.unixSockets), PodCIDRs: pods, SelfAddrs: self,
	}, nil
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range splitList(s) {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", e)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
