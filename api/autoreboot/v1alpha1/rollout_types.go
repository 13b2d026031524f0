package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RestartRequestAnnotation asks for a restart by hand (the kubectl plugin
// merge-patches it onto the RebootPolicy): whenever its value (a nonce,
// at most MaxRestartRequestLength characters) differs from
// status.lastRestartRequest, the controller records the nonce and a
// pending restart in one status write, emits RestartRequested and
// restarts the targets — in a restart window and within the throttle, but
// without the settle delay.
const RestartRequestAnnotation = "autoreboot.runbook.dev/restart-request"

// MaxRestartRequestLength bounds the nonce of RestartRequestAnnotation
// (and of ResumeAnnotation and ApproveAnnotation); a longer value is
// refused (RestartRequestInvalid, GateRequestInvalid) and never copied
// into status.
const MaxRestartRequestLength = 128

// RolloutSpec governs how the targets of one trigger are restarted.
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadline) || has(self.maxConcurrent)",message="rollout.progressDeadline gates a sequence: set rollout.maxConcurrent too"
type RolloutSpec struct {
	// MaxConcurrent is how many targets of a selector are restarted at once
	// (default: all). 1 restarts one workload at a time: the next only once
	// the previous has rolled out and is available again. Such a sequence
	// is health-gated: it halts when a restarted target does not become
	// available within ProgressDeadline.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`

	// ProgressDeadline is how long a target restarted by a sequence
	// (maxConcurrent set) may take to become available again (default
	// 10m). A Deployment whose own progressDeadlineSeconds passes first
	// (ProgressDeadlineExceeded) halts the sequence then. A halted
	// sequence restarts nothing more until `kubectl runbook resume` or the
	// target becomes available by itself.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('30m')",message="rollout.progressDeadline must be between 30s and 30m"
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// NotifySpec sends a message when a target is restarted or a restart is
// skipped. Events and metrics stay the record; a message is best effort.
type NotifySpec struct {
	// WebhookSecretRef names the Secret key holding the webhook URL (http
	// or https, e.g. a Slack or Teams incoming webhook). The Secret must
	// carry the label autoreboot.runbook.dev/usable: "true".
	WebhookSecretRef SecretKeySelector `json:"webhookSecretRef"`
}
