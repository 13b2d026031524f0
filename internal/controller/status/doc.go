// Package status is the controllers' shared kit, written once: conditions
// stamped by the injected clock, a status writer that never writes from a
// stale copy, event helpers (one reconcile's events collected and recorded
// once, bounded), the names of field managers and event reporters (and
// NewReporting, the writer and events under them), and the small helpers
// every controller needs the same way (InvalidSpecError, APIErrorReason,
// SecretNotUsableMessage, ManagedCache, PositiveOr).
//
// A status computed from the informer cache may be computed from a copy that
// has not seen the controller's own previous write yet. A merge patch of
// such a status leaves out every field that equals the stale value, so the
// apiserver keeps the newer, wrong one, and since status-only changes do
// not requeue, nothing corrects it. Writer therefore patches with the copy's
// resourceVersion as a precondition and, on a conflict, recomputes the
// status from a fresh read.
package status
