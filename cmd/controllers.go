package main

import (
	"errors"
	"flag"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runbook-dev/runbook/internal/registry"
)

var errCacheNotSynced = errors.New("informer caches not synced yet")

// registerControllers is the one place that lists the controllers built into
// the binary. Each controller's block adds its API group to the scheme, binds
// the flags it owns and registers a setup function that builds its reconciler
// with every dependency passed in (no package-level state).
func registerControllers(reg *registry.Registry, scheme *runtime.Scheme, fs *flag.FlagSet) {
	// +runbook:controllers
}
