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

// Weekday is a day of a restart window.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// Weekdays.
const (
	Monday    Weekday = "Mon"
	Tuesday   Weekday = "Tue"
	Wednesday Weekday = "Wed"
	Thursday  Weekday = "Thu"
	Friday    Weekday = "Fri"
	Saturday  Weekday = "Sat"
	Sunday    Weekday = "Sun"
)

// RestartWindow is a time of day, on some days of the week, in which
// restarts may be made. Times are wall-clock times in TimeZone, so a window
// keeps its local hours across daylight saving changes (on the day the
// clock skips an hour, the skipped part of a window does not exist).
// +kubebuilder:validation:XValidation:rule="self.from != self.to",message="restartWindows: from and to must differ (a window that wraps past midnight has to < from)"
type RestartWindow struct {
	// Days the window opens on (a window wrapping past midnight belongs to
	// the day it opens); empty means every day.
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	// +optional
	Days []Weekday `json:"days,omitempty"`
	// From is the opening time, "HH:MM" or "HH:MM:SS" (24-hour clock).
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`
	From string `json:"from"`
	// To is the closing time (exclusive); earlier than From wraps past
	// midnight.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`
	To string `json:"to"`
	// TimeZone is an IANA time zone name such as Europe/Berlin.
	// +kubebuilder:default="UTC"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

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
