package nsscaler

import (
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// GitOpsMetrics are the collectors of the GitOps pause.
type GitOpsMetrics struct {
	// Paused is runbook_nsscaler_gitops_paused{nsscaler,kind}.
	Paused *prometheus.GaugeVec
	// Writes is runbook_nsscaler_gitops_writes_total{nsscaler,kind,operation,result}:
	// counted apart from the workload writes.
	Writes *prometheus.CounterVec
}

func newGitOpsMetrics() GitOpsMetrics {
	return GitOpsMetrics{
		Paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "runbook_nsscaler_gitops_paused",
			Help: "GitOps objects (Kustomization, HelmRelease, Application) an NSScaler holds paused while the namespaces they manage are parked.",
		}, []string{"nsscaler", "kind"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbook_nsscaler_gitops_writes_total",
			Help: "Write requests to GitOps objects, by kind, operation (pause, resume) and result (ok, conflict, error).",
		}, []string{"nsscaler", "kind", "operation", "result"}),
	}
}

func (m GitOpsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Paused, m.Writes}
}

// gitOpsWrite counts one write to a GitOps object.
func (m *Metrics) gitOpsWrite(scaler, kind, op string, err error) {
	m.GitOps.Writes.WithLabelValues(scaler, kind, op, writeResult(err)).Inc()
}

// setGitOpsPaused sets the paused gauge of each kind.
func (m *Metrics) setGitOpsPaused(scaler string, byKind map[string]int) {
	for kind, n := range byKind {
		m.GitOps.Paused.WithLabelValues(scaler, kind).Set(float64(n))
	}
}

// forgetGitOps drops the series of a deleted NSScaler.
func (m *Metrics) forgetGitOps(scaler string) {
	m.GitOps.Paused.DeletePartialMatch(prometheus.Labels{"nsscaler": scaler})
	m.GitOps.Writes.DeletePartialMatch(prometheus.Labels{"nsscaler": scaler})
}

// writeResult is the result label of a write.
func writeResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case apierrors.IsConflict(err):
		return "conflict"
	}
	return "error"
}
