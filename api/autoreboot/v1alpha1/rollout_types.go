package v1alpha1

// RestartRequestAnnotation asks for a restart by hand (the kubectl plugin
// merge-patches it onto the RebootPolicy): whenever its value (a nonce,
// at most MaxRestartRequestLength characters) differs from
// status.lastRestartRequest, the controller records the nonce and a
// pending restart in one status write, emits RestartRequested and
// restarts the targets — in a restart window and within the throttle, but
// without the settle delay.
const RestartRequestAnnotation = "autoreboot.runbook.dev/restart-request"

// MaxRestartRequestLength bounds the nonce of RestartRequestAnnotation; a
// longer value is refused (RestartRequestInvalid) and never copied into
// status.
const MaxRestartRequestLength = 128

// RolloutSpec governs how the targets of one trigger are restarted.
type RolloutSpec struct {
	// MaxConcurrent is how many targets of a selector are restarted at once
	// (default: all). 1 restarts one workload at a time: the next only once
	// the previous has rolled out and is available again.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
}

// NotifySpec sends a message when a target is restarted or a restart is
// skipped. Events and metrics stay the record; a message is best effort.
type NotifySpec struct {
	// WebhookSecretRef names the Secret key holding the webhook URL (http
	// or https, e.g. a Slack or Teams incoming webhook). The Secret must
	// carry the label autoreboot.runbook.dev/usable: "true".
	WebhookSecretRef SecretKeySelector `json:"webhookSecretRef"`
}
