package v1alpha1

// DefaultTimeZone is the zone of a schedule that names none.
const DefaultTimeZone = "UTC"

// Schedule is a set of weekly windows in one time zone. Times are read on
// the zone's wall clock, so a window keeps its local hours across daylight
// saving changes; the rules for the hour a change skips or repeats are in
// docs (and internal/weekly): a wall-clock time stands for the first
// instant at which the zone's clock shows that time or a later one.
type Schedule struct {
	// TimeZone is the IANA time zone name (e.g. Europe/Berlin) every
	// window of this schedule is read in. A name the manager's time zone
	// database does not know is reported as a condition with the reason
	// InvalidSchedule, and the schedule is not acted on until it is fixed.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`

	// Windows are the weekly windows; a moment is inside the schedule when
	// it is inside any of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Windows []Window `json:"windows,omitempty"`
}

// Window is a time of day on some days of the week: it opens at `from` on
// each of its days and closes at `to`, on the next day when `to` is not
// after `from` (20:00–08:00 spans midnight). `to: "24:00"` is the end of
// the day.
// +kubebuilder:validation:XValidation:rule="self.from != self.to",message="from and to must differ; use 00:00 to 24:00 for a whole day"
// +kubebuilder:validation:XValidation:rule="self.from != '24:00'",message="from cannot be 24:00; 24:00 is only an end"
type Window struct {
	// Days on which the window opens: three-letter English day names,
	// comma-separated, with ranges, e.g. Mon-Fri, Sat,Sun or Fri-Mon (a
	// range wraps over the week's end). A window that spans midnight
	// belongs to the day it opens. Default: every day.
	// +optional
	// +kubebuilder:default="Mon-Sun"
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)(-(Mon|Tue|Wed|Thu|Fri|Sat|Sun))?(,(Mon|Tue|Wed|Thu|Fri|Sat|Sun)(-(Mon|Tue|Wed|Thu|Fri|Sat|Sun))?)*$`
	Days string `json:"days,omitempty"`

	// From is the wall-clock time the window opens, HH:MM or HH:MM:SS
	// (24-hour clock).
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?|24:00)$`
	From string `json:"from"`

	// To is the wall-clock time it closes (exclusive), HH:MM or HH:MM:SS;
	// 24:00 is the end of the day.
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?|24:00)$`
	To string `json:"to"`
}

// ReasonInvalidSchedule is the condition reason, in both kinds, of a
// schedule the CRD accepted but the manager cannot evaluate (a time zone
// its database does not know); nothing is done on its account until it is
// fixed.
const ReasonInvalidSchedule = "InvalidSchedule"
