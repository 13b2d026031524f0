// Command baseline is the comparison point of the Memcached benchmark: an
// operator with the behaviour of the kubebuilder getting-started tutorial,
// written for this benchmark from the tutorial's description (not from its
// code). A Memcached of its own group (tutorial.bench.runbook.dev, so it can
// share a cluster with Runbook's cache.runbook.dev) becomes a Deployment of
// spec.size replicas that it owns; the object carries a finalizer and
// Available/Progressing/Degraded conditions. Like the tutorial it watches its
// objects and the Deployments it owns with default settings (one worker,
// JSON clients, no predicates) and ends every reconcile with a status
// update.
//
// It accepts the flags the test harness passes to a manager:
// --kubeconfig, --health-probe-bind-address, --metrics-bind-address.
package main

import (
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	var metricsAddr, probeAddr string
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (0: off).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(addToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "building the manager")
		os.Exit(1)
	}
	r := &reconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("baseline-memcached")}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&Memcached{}).
		Owns(&appsv1.Deployment{}).
		Named("memcached").
		Complete(r); err != nil {
		log.Error(err, "building the controller")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
