// Command manager runs the Runbook controllers: RebootPolicy, Memcached and
// NSScaler, each selectable with --controllers.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/nsscaler"
	"github.com/runbook-dev/runbook/internal/metricsauth"
	"github.com/runbook-dev/runbook/internal/registry"
	"github.com/runbook-dev/runbook/internal/stdlog"
)

// errCacheNotSynced is what /readyz answers until the informers have synced.
var errCacheNotSynced = errors.New("informer caches not synced yet")

// managerFlags are the manager's own flags (the controllers bind theirs in
// registerControllers).
type managerFlags struct {
	controllers          string
	metricsAddr          string
	metricsSecure        bool
	metricsCertPath      string
	probeAddr            string
	pprofAddr            string
	enableLeaderElection bool
	leaderElectionNS     string
	leaderElectionID     string
	enableHTTP2          bool
	shutdownTimeout      time.Duration
	leaseDuration        time.Duration
	renewDeadline        time.Duration
	retryPeriod          time.Duration
	watchNamespaces      string
	apiQPS               float64
	apiBurst             int
	zap                  zap.Options
}

func main() {
	scheme, err := newScheme()
	utilruntime.Must(err)
	// Controllers plug in here. Each registration adds its API types to the
	// scheme and binds its own flags before flag.Parse.
	reg := &registry.Registry{}
	registerControllers(reg, scheme, flag.CommandLine)
	f := bindManagerFlags(flag.CommandLine, reg.Names())
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	// net/http logs what a tenant's probe target sends on an idle
	// connection through package log: bounded and structured from here on.
	stdlog.Redirect(ctrl.Log.WithName("stdlib"))
	setupLog := ctrl.Log.WithName("setup")
	selected, err := reg.Select(f.controllers)
	if err != nil {
		setupLog.Error(err, "invalid --controllers")
		os.Exit(2)
	}
	cacheOpts, err := cacheOptions(f.watchNamespaces, slices.ContainsFunc(selected, func(e registry.Entry) bool {
		return e.Name == nsscaler.Name
	}))
	if err != nil {
		setupLog.Error(err, "invalid --watch-namespaces")
		os.Exit(2)
	}
	mgr, err := newManager(f, scheme, cacheOpts)
	if err != nil {
		setupLog.Error(err, "creating manager")
		os.Exit(1)
	}
	for _, c := range selected {
		if err := c.Setup(mgr); err != nil {
			setupLog.Error(err, "setting up controller", "controller", c.Name)
			os.Exit(1)
		}
		setupLog.Info("controller enabled", "controller", c.Name)
	}
	if err := addHealthChecks(mgr); err != nil {
		setupLog.Error(err, "adding health checks")
		os.Exit(1)
	}
	setupLog.Info("starting manager", "controllers", len(selected), "leaderElection", f.enableLeaderElection)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

func bindManagerFlags(fs *flag.FlagSet, controllerNames []string) *managerFlags {
	f := &managerFlags{zap: zap.Options{Development: false}}
	fs.StringVar(&f.controllers, "controllers", "all",
		"Comma-separated controllers to run ("+strings.Join(controllerNames, ",")+"), or all.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0",
		"Address the metrics endpoint binds to, e.g. :8443 (https) or :8080 (http). 0 disables it.")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, allowing only callers the apiserver authenticates and authorizes.")
	fs.StringVar(&f.metricsCertPath, "metrics-cert-path", "",
		"Directory with tls.crt and tls.key for the metrics server; empty means a self-signed certificate.")
	fs.StringVar(&f.watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces whose RebootPolicies and Memcacheds (and their workloads) the manager watches; "+
			"empty watches all. NSScalers are cluster-scoped and keep selecting namespaces across the cluster.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "",
		"Address Go's /debug/pprof profiles are served on, e.g. 127.0.0.1:6060 (reach it with kubectl port-forward); empty disables it. "+
			"It has no authentication: never bind it where tenants' pods can connect.")
	fs.BoolVar(&f.enableLeaderElection, "leader-elect", false,
		"Elect a leader so that only one replica of the manager acts at a time.")
	fs.StringVar(&f.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease; required when running outside a cluster with --leader-elect.")
	fs.StringVar(&f.leaderElectionID, "leader-election-id", "runbook.runbook.dev", "Name of the leader election Lease.")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second,
		"How long a standby waits after the leader's last renewal before taking the Lease over (the failover time after a crash).")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew the Lease before it gives up leadership and exits; less than the lease duration.")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second,
		"How often the leader renews and a standby tries to acquire the Lease.")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 for the metrics server (off by default: HTTP/2 Stream Cancellation and Rapid Reset CVEs).")
	fs.DurationVar(&f.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second,
		"How long running reconciles and probe workers get to finish after SIGTERM.")
	fs.Float64Var(&f.apiQPS, "kube-api-qps", 50,
		"Requests per second the manager may send to the apiserver (client-side limit; client-go's default of 20 slows large parks).")
	fs.IntVar(&f.apiBurst, "kube-api-burst", 100, "Burst above --kube-api-qps the manager may send to the apiserver.")
	f.zap.BindFlags(fs)
	return f
}

// newManager builds the manager: client rate, cache scope, metrics server,
// health endpoints and leader election.
func newManager(f *managerFlags, scheme *runtime.Scheme, cacheOpts cache.Options) (ctrl.Manager, error) {
	metricsOpts, certWatcher, err := metricsOptions(f)
	if err != nil {
		return nil, err
	}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(f.apiQPS), f.apiBurst
	registerClientMetrics()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.enableLeaderElection,
		LeaderElectionID:        f.leaderElectionID,
		LeaderElectionNamespace: f.leaderElectionNS,
		// Give the lease up on SIGTERM so the standby takes over at once
		// instead of waiting for the lease to expire. Safe because the
		// process exits right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &f.leaseDuration,
		RenewDeadline:                 &f.renewDeadline,
		RetryPeriod:                   &f.retryPeriod,
		GracefulShutdownTimeout:       &f.shutdownTimeout,
	})
	if err != nil {
		return nil, err
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			return nil, fmt.Errorf("adding metrics certificate watcher: %w", err)
		}
	}
	return mgr, nil
}

// registerClientMetrics exposes how long requests to the apiserver wait in
// the client's own rate limiter (--kube-api-qps, --kube-api-burst) and how
// long they then take. rest_client_requests_total alone cannot tell a manager
// held back by its own limit from a slow apiserver.
func registerClientMetrics() {
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRateLimiterLatency, crmetrics.MetricRequestLatency)
}

// metricsOptions: HTTPS with authentication and authorization unless
// --metrics-secure=false, HTTP/2 off unless asked for, and a certificate
// from --metrics-cert-path (watched for renewal) or a self-signed one.
func metricsOptions(f *managerFlags) (metricsserver.Options, *certwatcher.CertWatcher, error) {
	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	opts := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.metricsSecure, TLSOpts: tlsOpts}
	if f.metricsSecure {
		// Only callers allowed to GET /metrics (a TokenReview plus a
		// SubjectAccessReview against the apiserver) may scrape; the
		// project's own filter, since controller-runtime's links all of
		// k8s.io/apiserver.
		opts.FilterProvider = metricsauth.FilterProvider(metricsauth.Options{})
	}
	if f.metricsCertPath == "" {
		return opts, nil, nil
	}
	w, err := certwatcher.New(filepath.Join(f.metricsCertPath, "tls.crt"), filepath.Join(f.metricsCertPath, "tls.key"))
	if err != nil {
		return opts, nil, fmt.Errorf("loading metrics certificate: %w", err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}

// addHealthChecks: /healthz answers while the process runs; /readyz once
// the informer caches have synced, so a rolling update of the manager does
// not route traffic (or hand over leadership) too early.
func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errCacheNotSynced
		}
		return nil
	})
}

// cacheOptions restricts the manager's cache to the given namespaces (all
// when empty). Namespaced objects elsewhere are then neither listed nor
// watched, so their events never reach a controller; cluster-scoped objects
// (NSScalers, CRDs) are cached as before, and the NSScaler controller keeps
// its own cluster-wide workload cache.
func cacheOptions(namespaces string, nsscalerEnabled bool) (cache.Options, error) {
	var opts cache.Options
	for _, ns := range strings.Split(namespaces, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return cache.Options{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if opts.DefaultNamespaces == nil {
			opts.DefaultNamespaces = map[string]cache.Config{}
		}
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	if opts.DefaultNamespaces != nil && nsscalerEnabled {
		// The NSScaler is cluster-scoped and decides the WakeRequests of
		// every namespace it parks, watched or not. Without the NSScaler
		// controller the WakeRequest CRD need not be installed at all.
		opts.ByObject = map[client.Object]cache.ByObject{
			&scalingv1alpha1.WakeRequest{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
		}
	}
	return opts, nil
}
