package probe

// Observation is the raw outcome of one probe, query or read.
type Observation struct {
	// Result is ResultSuccess, ResultFailure or ResultError. Change
	// triggers report ResultSuccess with a fingerprint.
	Result      string
	Fingerprint string
	// Reason is a CamelCase reason for ResultError (or a note of a
	// referenced trigger's success, e.g. ReferenceNotFound).
	Reason  string
	Message string
	// Targets is a referenced trigger's per-target outcome.
	Targets []TargetObservation
	// Change names what changed (watch triggers).
	Change ChangeNote
}

// TargetObservation is one target of a referenced trigger: which
// references its fingerprint covers, the fingerprint, and what changed.
type TargetObservation struct {
	Name, References, Fingerprint string
	Change                        ChangeNote
}
