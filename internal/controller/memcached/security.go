package memcached

import (
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// secretFileMode is the mode of the mounted Secret files: readable by the
// owner (root) and the group, which is the pod's fsGroup, memcache's group;
// nobody else.
const secretFileMode int32 = 0o440

func resolveSecurity(s *settings, spec *cachev1alpha1.MemcachedSpec) {
	s.TLS = resolveTLS(spec.TLS)
	s.Auth = resolveAuth(spec.Auth)
}

// checkSecurity repeats the CRD's rules for objects that never went through
// them (the exporter cannot authenticate, the TLS version is known).
func checkSecurity(s settings) error {
	if s.Auth != nil && s.Exporter {
		return &invalidSpecError{Msg: "auth cannot be combined with exporter.enabled: the memcached exporter cannot authenticate"}
	}
	if s.TLS != nil {
		if _, err := sslMinVersion(s.TLS.MinVersion); err != nil {
			return err
		}
	}
	return nil
}
