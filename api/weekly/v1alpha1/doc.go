// Package v1alpha1 holds the weekly schedule both Runbook kinds write their
// time windows in: NSScaler's spec.schedule (when namespaces sleep) and
// RebootPolicy's spec.restartSchedule (when restarts may be made). It
// belongs to no API group and registers no kind; the two groups embed its
// types, so one grammar, one set of markers and one set of words serve both.
// internal/weekly evaluates it.
// +kubebuilder:object:generate=true
package v1alpha1
