package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ResumeAnnotation resumes a halted rollout (`kubectl runbook resume`
// merge-patches a fresh nonce): whenever its value differs from
// status.rollout.lastResume, the controller records the nonce, lets go of
// the restarts that halted the sequence and goes on with it.
const ResumeAnnotation = "autoreboot.runbook.dev/resume"

// ApproveAnnotation approves the pending restarts of a RebootPolicy with
// spec.approval Required (`kubectl runbook approve`): whenever its value
// differs from status.approval.lastApproval, the restarts pending at that
// moment are released, each once. Whoever may patch the RebootPolicy may
// approve.
const ApproveAnnotation = "autoreboot.runbook.dev/approve"

// ApprovalMode says whether pending restarts wait for a human.
// +kubebuilder:validation:Enum=Automatic;Required
type ApprovalMode string

// Approval modes.
const (
	// ApprovalAutomatic: restarts happen as the rules allow.
	ApprovalAutomatic ApprovalMode = "Automatic"
	// ApprovalRequired: every pending restart waits for an approval.
	ApprovalRequired ApprovalMode = "Required"
)

// Condition reasons of the gates.
const (
	// ReasonRolloutHalted (Degraded, True): a target restarted by a
	// sequence did not become available in time; nothing more is
	// restarted until a resume or its recovery.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonAwaitingApproval (Ready, True): restarts wait for
	// `kubectl runbook approve`.
	ReasonAwaitingApproval = "AwaitingApproval"
)

// Event reasons of the gates.
const (
	EventRolloutHalted    = "RolloutHalted"
	EventRolloutResumed   = "RolloutResumed"
	EventRolloutRecovered = "RolloutRecovered"
	EventAwaitingApproval = "AwaitingApproval"
	EventApproved         = "Approved"
	// EventGateRequestInvalid: a resume or approve annotation is too long.
	EventGateRequestInvalid = "GateRequestInvalid"
)

// HaltedRestart is the restart that halted a sequence.
type HaltedRestart struct {
	// Kind and Name of the target.
	Kind TargetKind `json:"kind"`
	Name string     `json:"name"`
	// RestartedAt is the target's restartedAt stamp of that restart.
	RestartedAt string `json:"restartedAt"`
	// Since is when the halt was recognised.
	Since metav1.Time `json:"since"`
	// Reason: ProgressDeadlineExceeded (the Deployment's own deadline),
	// RolloutStalled (a StatefulSet or DaemonSet standing still) or
	// NotAvailable (rollout.progressDeadline passed).
	Reason string `json:"reason"`
	// Message says what was seen.
	// +optional
	Message string `json:"message,omitempty"`
}

// RolloutStatus is the state of the health gate of a sequence.
type RolloutStatus struct {
	// Halted is the restart that stopped the sequence (unset: running).
	// +optional
	Halted *HaltedRestart `json:"halted,omitempty"`
	// LastResume is the resume annotation's value last acted on.
	// +optional
	LastResume string `json:"lastResume,omitempty"`
	// ResumedBy is the field manager that set that value (client-chosen:
	// as trustworthy as whoever may patch the RebootPolicy).
	// +optional
	ResumedBy string `json:"resumedBy,omitempty"`
	// ResumeTime: restarts made before it no longer halt the sequence.
	// +optional
	ResumeTime *metav1.MicroTime `json:"resumeTime,omitempty"`
}

// ApprovalStatus records approvals (spec.approval Required).
type ApprovalStatus struct {
	// LastApproval is the approve annotation's value last acted on.
	// +optional
	LastApproval string `json:"lastApproval,omitempty"`
	// ApprovedBy is the field manager that set that value (client-chosen:
	// as trustworthy as whoever may patch the RebootPolicy).
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
	// ApprovalTime is when it was acted on.
	// +optional
	ApprovalTime *metav1.Time `json:"approvalTime,omitempty"`
	// Released are the restart ids (see the restart-id annotation) the
	// last approval released and that are still pending; each is made
	// once.
	// +optional
	Released []string `json:"released,omitempty"`
	// Awaiting names what waits for an approval now (a digest, so that it
	// is announced once).
	// +optional
	Awaiting string `json:"awaiting,omitempty"`
}
