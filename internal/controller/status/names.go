package status

// FieldOwner is the field manager of a controller's writes, the name its
// changes carry in managedFields: "runbook-<controller>".
func FieldOwner(controller string) string { return "runbook-" + controller }

// ReporterName is the reporting controller of its events:
// "<controller>-controller".
func ReporterName(controller string) string { return controller + "-controller" }
