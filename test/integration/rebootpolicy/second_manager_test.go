package rebootpolicy

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/probe"
)

// startSecondManager runs another manager in this process, until the test
// ends, for the RebootPolicies of ns labelled externalManagerLabel=label
// (the suite's manager ignores them). opts says what differs from the
// suite's manager (limits, clock, metrics); the rest is the suite's: its
// operator namespace, probes allowed to reach only the external server,
// and a cache of ns alone.
func startSecondManager(t *testing.T, ns, label string, opts rbpcontroller.Options) *rbpcontroller.Reconciler {
	t.Helper()
	mine, err := labels.Parse(externalManagerLabel + "=" + label)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{ns: {}},
			ByObject:          map[client.Object]cache.ByObject{&autorebootv1alpha1.RebootPolicy{}: {Label: mine}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	allow, err := egress.ParseRules(external.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	opts.Probes = probe.Settings{OperatorNamespace: operatorNamespace}
	opts.Network = egress.Settings{Allow: allow}
	opts.Namespaces = []string{ns}
	r, err := rbpcontroller.Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the %s manager: %v", label, err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatalf("the %s manager's cache did not sync", label)
	}
	return r
}
