package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runbook-dev/runbook/internal/registry"
)

// sharedFlags are the flags more than one controller reads.
type sharedFlags struct {
	// operatorNamespace: NSScalers never park it, and the RebootPolicy
	// fingerprint key lives there.
	operatorNamespace *string
}

// registerControllers is the one place that lists the controllers built into
// the binary. Each controller's register function (in the file named after
// it) adds its API group to the scheme, binds the flags it owns and
// registers a setup function that builds it with every dependency passed in
// (no package-level state).
func registerControllers(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet) {
	shared := sharedFlags{
		operatorNamespace: fs.String("operator-namespace", os.Getenv("POD_NAMESPACE"),
			"The operator's own namespace, which NSScalers never park and where the RebootPolicy fingerprint key Secret lives (default $POD_NAMESPACE)."),
	}
	// +runbook:controllers
	registerRebootPolicy(reg, scheme, fs, shared)
	registerNSScaler(reg, scheme, fs, shared)
	registerMemcached(reg, scheme, fs, shared)
}
