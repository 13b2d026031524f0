package status

// FieldOwnerPrefix starts every field manager of the manager's writes. Each
// controller declares its own as the constant FieldOwnerPrefix + Name, so
// that its managedFields entry can never change by accident.
const FieldOwnerPrefix = "runbook-"

// FieldOwner is the field manager of a controller's writes, the name its
// changes carry in managedFields: "runbook-<controller>".
func FieldOwner(controller string) string { return FieldOwnerPrefix + controller }

// ReporterName is the reporting controller of its events:
// "<controller>-controller".
func ReporterName(controller string) string { return controller + "-controller" }
