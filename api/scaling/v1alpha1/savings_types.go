package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SavingsPrices turn the savings report into money. The admin sets them;
// they are only multiplied, never fetched from anywhere.
type SavingsPrices struct {
	// Currency names the unit of the prices, e.g. EUR or USD (3 to 8 letters).
	// +kubebuilder:validation:Pattern=`^[A-Za-z]{3,8}$`
	Currency string `json:"currency"`

	// CPUCoreHour is the price of one requested CPU core for one hour.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	CPUCoreHour *resource.Quantity `json:"cpuCoreHour,omitempty"`

	// MemoryGiBHour is the price of one requested GiB of memory for one hour.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	MemoryGiBHour *resource.Quantity `json:"memoryGiBHour,omitempty"`
}

// SavingsTotals are what parked workloads did not run: the pod-hours and the
// requested CPU core-hours and memory GiB-hours (decimal quantities, e.g.
// 1500m = 1.5).
type SavingsTotals struct {
	// +optional
	PodHours resource.Quantity `json:"podHours"`
	// +optional
	CPUCoreHours resource.Quantity `json:"cpuCoreHours"`
	// +optional
	MemoryGiBHours resource.Quantity `json:"memoryGiBHours"`
}

// SavingsRate is what the parked workloads would run at once: the totals
// grow by this much per hour while it holds.
type SavingsRate struct {
	// Pods is the number of pods not running.
	// +optional
	Pods int64 `json:"pods"`
	// CPU is the CPU they would request (cores).
	// +optional
	CPU resource.Quantity `json:"cpu"`
	// Memory is the memory they would request (bytes).
	// +optional
	Memory resource.Quantity `json:"memory"`
}

// NamespaceSavings is one namespace's savings: the closed parked intervals
// in the totals, the open one as currentRate since rateSince.
type NamespaceSavings struct {
	// Namespace is the namespace's name.
	Namespace string `json:"namespace"`

	// The totals of the intervals that ended (the rate changed or the
	// namespace woke up).
	SavingsTotals `json:",inline"`

	// CurrentRate is what is parked in the namespace now.
	// +optional
	CurrentRate SavingsRate `json:"currentRate"`

	// RateSince is when currentRate started; absent when nothing is parked.
	// The namespace's savings now are the totals plus currentRate × (now −
	// rateSince).
	// +optional
	RateSince *metav1.Time `json:"rateSince,omitempty"`

	// Daily are the namespace's closed intervals per UTC day since
	// status.savings.namespaceDailyFrom, oldest first; a day without an
	// entry saved nothing.
	// +optional
	// +listType=map
	// +listMapKey=day
	Daily []DailySavings `json:"daily,omitempty"`
}

// DailySavings are the savings of the intervals closed in one UTC day (the
// part of each interval that falls in it).
type DailySavings struct {
	// Day is the UTC day, YYYY-MM-DD.
	Day string `json:"day"`

	SavingsTotals `json:",inline"`
}

// SavingsStatus is an NSScaler's savings report. The controller writes it
// only when a rate changes (a park, a restore, a workload added, removed or
// resized in a parked namespace): readers add each namespace's open
// interval themselves (kubectl runbook savings, the metrics).
type SavingsStatus struct {
	// Since is when the report began: the first park this NSScaler's
	// controller counted. The totals cover the time since.
	Since metav1.Time `json:"since"`

	// The totals of every closed interval of every namespace, including
	// namespaces no longer listed.
	SavingsTotals `json:",inline"`

	// CurrentRate is the sum of the namespaces' current rates.
	// +optional
	CurrentRate SavingsRate `json:"currentRate"`

	// Namespaces are the namespaces with something parked now, and those
	// the NSScaler still owns that were parked since counting began.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	Namespaces []NamespaceSavings `json:"namespaces,omitempty"`

	// DailyFrom is when daily began: the NSScaler's daily entries hold every
	// part of a closed interval after it (the first park counted, the first
	// write by a manager that keeps them, or the start of the oldest day
	// kept).
	// +optional
	DailyFrom *metav1.Time `json:"dailyFrom,omitempty"`

	// Daily are the closed intervals of every namespace per UTC day, oldest
	// first, for the last days (at most 35; older days are dropped).
	// +optional
	// +listType=map
	// +listMapKey=day
	Daily []DailySavings `json:"daily,omitempty"`

	// NamespaceDailyFrom is when the namespaces' daily entries begin: at or
	// after dailyFrom, later when their number had to be bounded (the
	// oldest days of every namespace go first, the NSScaler's daily stays).
	// +optional
	NamespaceDailyFrom *metav1.Time `json:"namespaceDailyFrom,omitempty"`

	// Money is the closed totals and the current rate priced with
	// spec.prices; absent without prices.
	// +optional
	Money *SavingsMoney `json:"money,omitempty"`
}

// SavingsMoney is the priced savings.
type SavingsMoney struct {
	// Currency is spec.prices.currency.
	Currency string `json:"currency"`
	// Total is the price of the closed totals (CPU and memory).
	Total resource.Quantity `json:"total"`
	// PerHour is the price of the current rate for one hour.
	PerHour resource.Quantity `json:"perHour"`
}
