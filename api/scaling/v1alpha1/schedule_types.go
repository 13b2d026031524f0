package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// Phase is what an NSScaler does with its namespaces at a given moment.
type Phase string

const (
	// PhaseAsleep parks the selected, non-whitelisted namespaces.
	PhaseAsleep Phase = "Asleep"
	// PhaseAwake lets them run (restored exactly).
	PhaseAwake Phase = "Awake"
	// PhasePartial (status only): some owned namespaces are parked, others
	// run (whitelisted, woken by spec.wake).
	PhasePartial Phase = "Partial"
)

// Mode says whether an NSScaler acts or only reports.
// +kubebuilder:validation:Enum=Enforce;DryRun
type Mode string

const (
	// ModeEnforce parks and restores (the default).
	ModeEnforce Mode = "Enforce"
	// ModeDryRun writes nothing to workloads: status and events say what
	// would be parked or restored, and when.
	ModeDryRun Mode = "DryRun"
)

// Schedule says when the selected namespaces sleep: inside its windows
// (the weekly schedule both kinds share: timeZone and windows, see
// docs/nsscaler.md, "Schedules"), unless an exception says otherwise.
// +kubebuilder:validation:XValidation:rule="(has(self.windows) && size(self.windows) > 0) || (has(self.exceptions) && size(self.exceptions) > 0)",message="a schedule needs at least one window or exception"
type Schedule struct {
	// The namespaces sleep inside the windows and run outside all of them.
	// Exception dates are read in timeZone too.
	weeklyv1alpha1.Schedule `json:",inline"`

	// Exceptions are absolute periods that force a phase whatever the
	// windows say (holidays, a release freeze). When several cover the
	// same moment, the first listed wins.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Exceptions []ScheduleException `json:"exceptions,omitempty"`
}

// ScheduleException forces a phase during an absolute period.
// +kubebuilder:validation:XValidation:rule="size(self.from) != size(self.until) || size(self.from) != 10 || self.from <= self.until",message="until must not be before from"
// +kubebuilder:validation:XValidation:rule="size(self.from) == 10 || size(self.until) == 10 || timestamp(self.from) < timestamp(self.until)",message="until must be after from"
type ScheduleException struct {
	// Name says what the exception is for (shown in status), e.g.
	// christmas or release-freeze.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_. ]*[A-Za-z0-9])?$`
	Name string `json:"name,omitempty"`

	// From is when it starts: an RFC 3339 time (2026-12-24T18:00:00+01:00)
	// or a date (2026-12-24: the start of that day in the time zone).
	// +kubebuilder:validation:MaxLength=35
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2}))?$`
	From string `json:"from"`

	// Until is when it ends: an RFC 3339 time (exclusive) or a date (the
	// whole day is included: it ends at the start of the next day).
	// +kubebuilder:validation:MaxLength=35
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2}))?$`
	Until string `json:"until"`

	// Phase is forced while the exception lasts: Asleep or Awake.
	// +kubebuilder:validation:Enum=Asleep;Awake
	Phase Phase `json:"phase"`
}

// WakeEntry lets one namespace run until a time, after which it is parked
// again by itself (when the schedule, or the absence of one, says Asleep).
type WakeEntry struct {
	// Namespace to wake (a full name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Until is when the wake-up ends (RFC 3339).
	// +kubebuilder:validation:Format=date-time
	Until metav1.Time `json:"until"`
}

// ActiveException is the exception in force, in status.
type ActiveException struct {
	// Name of the exception (its index, e.g. "#2", when it has none).
	Name string `json:"name"`
	// Phase it forces.
	Phase Phase `json:"phase"`
	// Until is when it ends.
	Until metav1.Time `json:"until"`
}

// ContestedWorkload is a workload another field manager keeps scaling up
// while it should be parked; the controller has stopped re-parking it
// until RetryAt.
type ContestedWorkload struct {
	// Kind, Namespace and Name name the workload.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Manager is the field manager that scaled it up last (managedFields).
	Manager string `json:"manager"`
	// RetryAt is when the controller parks it again.
	RetryAt metav1.Time `json:"retryAt"`
}

// DryRunStatus says what a DryRun NSScaler would do now.
type DryRunStatus struct {
	// WouldPark counts the workloads it would park now.
	WouldPark int32 `json:"wouldPark"`
	// WouldRestore counts the workloads it would restore now.
	WouldRestore int32 `json:"wouldRestore"`
}
