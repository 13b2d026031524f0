package v1alpha1

// GitOpsSpec says which GitOps tools an NSScaler pauses while the namespaces
// their objects manage are parked, so that the tool does not put the parked
// replicas back. Off by default. A GitOps object is paused only when its own
// spec or status shows that it manages the parked namespace: a workload's
// labels only name candidates.
type GitOpsSpec struct {
	// Flux suspends (spec.suspend: true) the Flux Kustomizations and
	// HelmReleases that manage a parked namespace's workloads, and
	// restores their previous spec.suspend on wake.
	// +optional
	Flux bool `json:"flux,omitempty"`

	// ArgoCD switches off automated sync (spec.syncPolicy.automated, which
	// holds self-heal) of the Argo CD Applications that manage a parked
	// namespace's workloads, and restores it exactly on wake.
	// +optional
	ArgoCD bool `json:"argoCD,omitempty"`
}

// Kinds of GitOps objects an NSScaler may pause.
const (
	GitOpsKindKustomization = "Kustomization"
	GitOpsKindHelmRelease   = "HelmRelease"
	GitOpsKindApplication   = "Application"
)

// Condition type and reasons of the GitOps pause.
const (
	// ConditionGitOpsPaused is True while the NSScaler holds GitOps objects
	// paused; it is present only when spec.gitOps enables a tool or
	// objects are still paused.
	ConditionGitOpsPaused = "GitOpsPaused"
	// ReasonGitOpsObjectsPaused: objects are paused (status.gitOps).
	ReasonGitOpsObjectsPaused = "ObjectsPaused"
	// ReasonGitOpsNothingToPause: no verified GitOps object manages a
	// parked namespace.
	ReasonGitOpsNothingToPause = "NothingToPause"
	// ReasonGitOpsKindMissing: an enabled tool's CRD is not installed;
	// its objects are not looked for (workloads are parked regardless).
	ReasonGitOpsKindMissing = "GitOpsKindMissing"
	// ReasonGitOpsWriteFailed: pausing or resuming a GitOps object failed;
	// retried.
	ReasonGitOpsWriteFailed = "GitOpsWriteFailed"
)

// Event reasons of the GitOps pause.
const (
	// EventGitOpsPaused (Normal): GitOps objects were paused.
	EventGitOpsPaused = "GitOpsPaused"
	// EventGitOpsResumed (Normal): GitOps objects got back what they had.
	EventGitOpsResumed = "GitOpsResumed"
	// EventGitOpsRepaused (Warning): objects paused by the NSScaler were
	// resumed by someone while the namespaces they manage are parked, and
	// were paused again (the record of before the park kept).
	EventGitOpsRepaused = "GitOpsRepaused"
	// EventGitOpsFailed (Warning): pausing or resuming failed.
	EventGitOpsFailed = "GitOpsFailed"
)

// GitOpsObject names a GitOps object the NSScaler holds paused.
type GitOpsObject struct {
	// Kind is Kustomization, HelmRelease or Application.
	Kind string `json:"kind"`
	// Namespace and Name locate it.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ParkedNamespaces are the parked namespaces it manages (at most 10).
	// +optional
	ParkedNamespaces []string `json:"parkedNamespaces,omitempty"`
}

// GitOpsStatus reports the GitOps objects paused for parked namespaces.
type GitOpsStatus struct {
	// PausedCount counts the GitOps objects this NSScaler holds paused.
	PausedCount int32 `json:"pausedCount"`
	// Paused lists (at most 20 of) them, by kind, namespace and name.
	// +optional
	Paused []GitOpsObject `json:"paused,omitempty"`
	// PausedByOthers counts GitOps objects managing a parked namespace that
	// were already paused by someone else: left as they are, also on wake.
	PausedByOthers int32 `json:"pausedByOthers"`
	// Unverified counts the GitOps objects that workloads of parked
	// namespaces name (by label or annotation) but whose own spec and
	// status do not show that they manage the namespace (or that do not
	// exist): they are not touched.
	Unverified int32 `json:"unverified"`
}
