package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxBlockingAlerts bounds spec.blockingAlerts.
const MaxBlockingAlerts = 16

// AlertName names a Prometheus alert (the alertname label of its ALERTS
// series): a classic metric name. It is only ever compared with the names
// Prometheus answers, never written into a query; the rule keeps label
// matchers and PromQL out of the spec all the same, so that a mistake is
// said at once instead of never matching.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z_:][a-zA-Z0-9_:]*$')",message="a blocking alert is a Prometheus alert name: letters, digits, '_' and ':', not starting with a digit (no label matchers, quotes or PromQL)"
type AlertName string

// Condition reasons of the alerts gate (spec.blockingAlerts).
const (
	// ReasonBlockedByAlerts (Ready, True): pending restarts wait while a
	// blocking alert fires for the namespace.
	ReasonBlockedByAlerts = "BlockedByAlerts"
	// ReasonAlertsUnavailable (Degraded, True): Prometheus could not tell
	// whether a blocking alert fires; pending restarts wait (fail safe).
	ReasonAlertsUnavailable = "AlertsUnavailable"
	// ReasonAlertsNotConfigured (Degraded, True): spec.blockingAlerts is
	// set but the manager has no --prometheus-url; pending restarts wait.
	ReasonAlertsNotConfigured = "AlertsNotConfigured"
)

// Event reasons of the alerts gate: the three condition reasons above
// when restarts start to wait for that reason, and EventAlertsCleared when
// they go on.
const EventAlertsCleared = "AlertsCleared"

// BlockingAlertsStatus says why pending restarts wait for the alerts gate.
type BlockingAlertsStatus struct {
	// Reason they wait: BlockedByAlerts, AlertsUnavailable or
	// AlertsNotConfigured.
	Reason string `json:"reason"`
	// Firing are the blocking alerts Prometheus last reported firing for
	// the namespace (BlockedByAlerts).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Firing []AlertName `json:"firing,omitempty"`
	// Since is when the restarts started to wait for this reason.
	Since metav1.Time `json:"since"`
}
