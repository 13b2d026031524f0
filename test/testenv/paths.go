// Package testenv starts the integration-test control plane (envtest: a real
// kube-apiserver and etcd, no controllers) from the binaries that
// `make k8s-binaries` builds into bin/k8s.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// RepoRoot is the directory holding the project's go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinDir is where the control-plane binaries live: $RUNBOOK_K8S_BIN or bin/k8s.
func BinDir() string {
	if d := os.Getenv("RUNBOOK_K8S_BIN"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin", "k8s")
}

// RequireBinaries fails loudly, naming the command that fixes it, when a
// control-plane binary is missing: a missing prerequisite is never a skip.
func RequireBinaries(names ...string) error {
	for _, n := range names {
		p := filepath.Join(BinDir(), n)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: run `make k8s-binaries` (builds the local control plane from source, ~15 min cold)", p)
		}
	}
	return nil
}

// ServiceMonitorCRD is prometheus-operator's ServiceMonitor CRD with its
// real schema (`make servicemonitor-crd` regenerates it from the pinned
// module), for tests that install it.
func ServiceMonitorCRD() string {
	return filepath.Join(RepoRoot(), "test", "testdata", "crds", "monitoring.coreos.com_servicemonitors.yaml")
}

// CertificateCRD is cert-manager's Certificate CRD, generated from its API
// types (make cert-manager-crd).
func CertificateCRD() string {
	return filepath.Join(RepoRoot(), "test", "testdata", "crds", "cert-manager.io_certificates.yaml")
}

// PrometheusRuleCRD is prometheus-operator's PrometheusRule CRD, generated
// from its API types (make prometheusrule-crd).
func PrometheusRuleCRD() string {
	return filepath.Join(RepoRoot(), "test", "testdata", "crds", "monitoring.coreos.com_prometheusrules.yaml")
}
