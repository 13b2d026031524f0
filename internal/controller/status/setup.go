package status

import "sigs.k8s.io/controller-runtime/pkg/manager"

// Reporting is how a controller reports: its status Writer, under its field
// manager, and its Events, under its reporter name. Every controller's Setup
// builds it from the manager by name, so the two names cannot drift apart
// between controllers.
type Reporting struct {
	Status *Writer
	Events Events
}

// NewReporting builds the Reporting of the controller name on mgr's client,
// apiserver reader and event broadcaster; its events are bounded by budget,
// the manager's one EventBudget (nil: unbounded).
func NewReporting(mgr manager.Manager, name string, budget *EventBudget) Reporting {
	return Reporting{
		Status: NewWriter(mgr.GetClient(), mgr.GetAPIReader(), FieldOwner(name)),
		Events: NewEvents(mgr, name, budget),
	}
}

// NewEvents are the Events of the controller name, reported under
// ReporterName(name) and bounded by budget (nil: unbounded).
func NewEvents(mgr manager.Manager, name string, budget *EventBudget) Events {
	return Events{Recorder: budget.Recorder(name, mgr.GetEventRecorder(ReporterName(name)))}
}

// PositiveOr is n, or def when n is not positive: a count an Options leaves
// at zero means the controller's default.
func PositiveOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
