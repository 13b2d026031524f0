package status

import "sigs.k8s.io/controller-runtime/pkg/cache"

// ManagedCache registers a cache a controller builds for itself (a trimmed
// or metadata-only one) with the manager as one of its caches: the manager
// starts it and waits for it to sync before it starts the controllers.
type ManagedCache struct{ cache.Cache }

// GetCache makes the manager see a cache in it.
func (m ManagedCache) GetCache() cache.Cache { return m.Cache }
