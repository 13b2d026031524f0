package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// DeletionPolicy says what happens to parked workloads when their NSScaler is
// deleted.
// +kubebuilder:validation:Enum=Restore;Keep
type DeletionPolicy string

const (
	// DeletionPolicyRestore restores every parked workload to its recorded
	// original before the NSScaler goes away (the default).
	DeletionPolicyRestore DeletionPolicy = "Restore"
	// DeletionPolicyKeep leaves workloads parked; their annotations stay, so
	// a later NSScaler that selects the namespace can still restore them.
	DeletionPolicyKeep DeletionPolicy = "Keep"
)

// Built-in workload kinds, given without a group.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindCronJob     = "CronJob"
)

// WorkloadKind names a kind of workload to park. Built-in kinds (Deployment,
// StatefulSet, CronJob) are given without a group; any other kind must name
// its API group and must serve the scale subresource (e.g.
// group: cache.runbook.dev, kind: Memcached).
// +kubebuilder:validation:XValidation:rule="has(self.group) && size(self.group) > 0 || self.kind in ['Deployment', 'StatefulSet', 'CronJob']",message="a kind without a group must be one of Deployment, StatefulSet, CronJob"
// +kubebuilder:validation:XValidation:rule="!has(self.group) || !(self.group in ['apps', 'batch', 'core', 'extensions'])",message="built-in kinds are given without a group; a group names a custom resource with a scale subresource"
type WorkloadKind struct {
	// Group is the API group of a custom resource kind; empty for the
	// built-in kinds.
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Group string `json:"group,omitempty"`

	// Kind is the kind, e.g. Deployment or Memcached.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`
}

// NSScalerSpec selects namespaces and says which of their workloads to park.
// +kubebuilder:validation:XValidation:rule="(has(self.namespacePrefix) && size(self.namespacePrefix) > 0) || has(self.namespaceSelector)",message="set namespacePrefix or namespaceSelector (or both)"
// +kubebuilder:validation:XValidation:rule="!has(self.namespaceSelector) || (has(self.namespaceSelector.matchLabels) && size(self.namespaceSelector.matchLabels) > 0) || (has(self.namespaceSelector.matchExpressions) && size(self.namespaceSelector.matchExpressions) > 0)",message="namespaceSelector must not be empty: an empty selector would select every namespace"
// +kubebuilder:validation:XValidation:rule="!has(self.excludeSelector) || (has(self.excludeSelector.matchLabels) && size(self.excludeSelector.matchLabels) > 0) || (has(self.excludeSelector.matchExpressions) && size(self.excludeSelector.matchExpressions) > 0)",message="excludeSelector must not be empty: an empty selector would exclude every workload"
type NSScalerSpec struct {
	// NamespacePrefix selects the namespaces whose name starts with it. When
	// namespaceSelector is set too, a namespace must match both.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=62
	// +kubebuilder:validation:Pattern=`^[a-z0-9][-a-z0-9]*$`
	NamespacePrefix string `json:"namespacePrefix,omitempty"`

	// NamespaceSelector selects namespaces by label. It must not be empty.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Whitelist names the selected namespaces that keep running (full names).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Whitelist []string `json:"whitelist,omitempty"`

	// Kinds lists the kinds of workloads to park. Deployments and StatefulSets
	// are scaled to zero, CronJobs are suspended, custom resources are scaled
	// to zero through their scale subresource.
	// +optional
	// +listType=map
	// +listMapKey=group
	// +listMapKey=kind
	// +kubebuilder:default={{kind:"Deployment"},{kind:"StatefulSet"}}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Kinds []WorkloadKind `json:"kinds,omitempty"`

	// Suspend stops the NSScaler from acting: nothing is parked or restored
	// while it is true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DeletionPolicy says what happens to parked workloads when the NSScaler
	// is deleted: Restore (default) or Keep.
	// +optional
	// +kubebuilder:default=Restore
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Schedule parks the selected, non-whitelisted namespaces only during
	// its windows (and Asleep exceptions). Without a schedule they are
	// parked all the time.
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`

	// Wake lets namespaces run until a time; each is parked again by itself
	// when its entry expires. Entries that expired are ignored (and may be
	// removed at leisure).
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +kubebuilder:validation:MaxItems=256
	Wake []WakeEntry `json:"wake,omitempty"`

	// ExcludeSelector selects workloads (by their own labels) that are never
	// parked; a parked workload that comes to match is restored. It must
	// not be empty.
	// +optional
	ExcludeSelector *metav1.LabelSelector `json:"excludeSelector,omitempty"`

	// Mode is Enforce (default) or DryRun: nothing is written to
	// workloads; status and events say what would be parked or restored,
	// and status.nextTransition when.
	// +optional
	// +kubebuilder:default=Enforce
	Mode Mode `json:"mode,omitempty"`

	// ParkedReplicas is the replica count a parked workload keeps
	// (Deployments, StatefulSets, custom kinds; a KEDA ScaledObject is
	// paused at it). A workload already at or below it is left as it is:
	// not written, nothing recorded. CronJobs are suspended whatever it
	// says. Changing it while parked re-parks to the new count.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	ParkedReplicas int32 `json:"parkedReplicas,omitempty"`

	// GracePeriod keeps a workload created less than this long ago (by its
	// creationTimestamp) running; it is parked once it is older. A Go
	// duration ("10m", "1h30m"), at most 24h. Already parked workloads are
	// not affected.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="gracePeriod must be at most 24h"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`

	// Prices turn status.savings into money (see SavingsPrices).
	// +optional
	Prices *SavingsPrices `json:"prices,omitempty"`

	// SelfService lets the selected namespaces' teams wake their own
	// namespace with a WakeRequest, within limits (see SelfService).
	// +optional
	SelfService *SelfService `json:"selfService,omitempty"`
	// GitOps pauses the Flux and Argo CD objects that manage a namespace
	// while it is parked (see GitOpsSpec).
	// +optional
	GitOps *GitOpsSpec `json:"gitOps,omitempty"`
}

// Condition types of an NSScaler.
const (
	// ConditionReady is True when the last reconcile applied the spec.
	ConditionReady = "Ready"
	// ConditionParked is True when no pod remains in a parked namespace.
	ConditionParked = "Parked"
	// ConditionDegraded is True when some workloads could not be handled or
	// namespaces are contested by another NSScaler.
	ConditionDegraded = "Degraded"
	// ConditionContested is True while another field manager keeps scaling
	// up parked workloads and the controller has stopped re-parking them.
	ConditionContested = "Contested"
)

// Condition reasons of an NSScaler.
const (
	ReasonReconciled        = "Reconciled"
	ReasonSuspended         = "Suspended"
	ReasonReconcileError    = "ReconcileError"
	ReasonPodsRemaining     = "PodsRemaining"
	ReasonWorkloadsPending  = "WorkloadsPending"
	ReasonAllPodsGone       = "AllPodsGone"
	ReasonNothingParked     = "NothingParked"
	ReasonNamespaceConflict = "NamespaceConflict"
	ReasonWorkloadErrors    = "WorkloadErrors"
	ReasonKindUnavailable   = "KindUnavailable"
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonAsExpected        = "AsExpected"
	ReasonRestoring         = "Restoring"
	ReasonInvalidSelector   = "InvalidSelector"
	// ReasonInvalidSchedule: the schedule cannot be evaluated (an unknown
	// time zone, an exception whose end precedes its start); nothing is
	// parked or restored until it is fixed. RebootPolicy uses the same
	// reason for its restartSchedule.
	ReasonInvalidSchedule = weeklyv1alpha1.ReasonInvalidSchedule
	// ReasonDryRun: spec.mode is DryRun; the message says what would be
	// done.
	ReasonDryRun = "DryRun"
	// ReasonFieldManagerConflict: Contested is True; the message names the
	// workloads and the managers scaling them up.
	ReasonFieldManagerConflict = "FieldManagerConflict"
	// ReasonNoConflict: Contested is False.
	ReasonNoConflict = "NoConflict"
	// ReasonWorkloadsInGrace: Parked is False while workloads younger than
	// spec.gracePeriod wait to be parked; the message says how many and
	// until when.
	ReasonWorkloadsInGrace = "WorkloadsInGrace"
	// ReasonParkedReplicasRunning: Parked is True with spec.parkedReplicas
	// above zero: the only pods left are those the parked workloads keep
	// (and those of workloads left at or below parkedReplicas).
	ReasonParkedReplicasRunning = "ParkedReplicasRunning"
)

// Event reasons of an NSScaler (events.k8s.io/v1, regarding the NSScaler,
// related: the namespace).
const (
	// EventNamespaceParked (Normal): a reconcile parked workloads in a
	// namespace.
	EventNamespaceParked = "NamespaceParked"
	// EventNamespaceRestored (Normal): a reconcile restored workloads in a
	// namespace to their recorded originals.
	EventNamespaceRestored = "NamespaceRestored"
	// EventWorkloadsFailed (Warning): writes in a namespace failed.
	EventWorkloadsFailed = "WorkloadsFailed"
	// EventWouldPark (Normal): a DryRun NSScaler would park workloads in a
	// namespace now.
	EventWouldPark = "WouldPark"
	// EventWouldRestore (Normal): a DryRun NSScaler would restore workloads
	// in a namespace now.
	EventWouldRestore = "WouldRestore"
	// EventWorkloadContested (Warning): another field manager scaled a
	// parked workload up repeatedly; the controller stops re-parking it for
	// a while (the note names the manager and until when).
	EventWorkloadContested = "WorkloadContested"
)

// NamespaceConflict names a namespace that another NSScaler selects too.
type NamespaceConflict struct {
	// Namespace is the contested namespace.
	Namespace string `json:"namespace"`
	// Owner is the NSScaler that acts on it: the oldest one selecting it.
	Owner string `json:"owner"`
}

// NSScalerStatus is the observed state of an NSScaler.
type NSScalerStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Parked, Degraded, Contested.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ParkedNamespaces are the selected namespaces whose workloads are parked.
	// +optional
	// +listType=set
	ParkedNamespaces []string `json:"parkedNamespaces,omitempty"`

	// ActiveNamespaces are the selected namespaces that keep running
	// (whitelisted).
	// +optional
	// +listType=set
	ActiveNamespaces []string `json:"activeNamespaces,omitempty"`

	// ParkedNamespaceCount is the length of parkedNamespaces.
	// +optional
	ParkedNamespaceCount int32 `json:"parkedNamespaceCount"`

	// ActiveNamespaceCount is the length of activeNamespaces.
	// +optional
	ActiveNamespaceCount int32 `json:"activeNamespaceCount"`

	// Conflicts lists selected namespaces that another NSScaler selects too.
	// +optional
	Conflicts []NamespaceConflict `json:"conflicts,omitempty"`

	// ParkedWorkloads counts the workloads held parked (replicas 0 or
	// suspended, with their original recorded).
	// +optional
	ParkedWorkloads int32 `json:"parkedWorkloads"`

	// ControlledWorkloads counts workloads in parked namespaces that are
	// controlled by another object (an owner reference with controller:
	// true) and therefore left alone.
	// +optional
	ControlledWorkloads int32 `json:"controlledWorkloads"`

	// PodsRemaining counts pods (including terminating ones) still present
	// in parked namespaces.
	// +optional
	PodsRemaining int32 `json:"podsRemaining"`

	// Done is true when every targeted workload is parked and no pod was
	// observed in a parked namespace.
	// +optional
	Done bool `json:"done"`

	// ParkedKinds are the custom-resource kinds this NSScaler has parked
	// objects of; they stay watched until restored even when removed from
	// spec.kinds.
	// +optional
	ParkedKinds []WorkloadKind `json:"parkedKinds,omitempty"`

	// Phase is Asleep (every owned namespace parked), Awake (none) or
	// Partial (some run: whitelisted or woken).
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Reason says in words why the phase is what it is (the window or
	// exception in force, no schedule, suspended, DryRun).
	// +optional
	Reason string `json:"reason,omitempty"`

	// NextTransition is when the schedule (or a wake entry) next changes
	// what is parked; empty when nothing is due.
	// +optional
	NextTransition *metav1.Time `json:"nextTransition,omitempty"`

	// ActiveException is the schedule exception in force, if any.
	// +optional
	ActiveException *ActiveException `json:"activeException,omitempty"`

	// Woken are the wake entries in force (namespace and until).
	// +optional
	Woken []WakeEntry `json:"woken,omitempty"`

	// ExcludedWorkloads counts workloads in parked namespaces that are not
	// parked because they are excluded (annotation or excludeSelector).
	// +optional
	ExcludedWorkloads int32 `json:"excludedWorkloads"`

	// ContestedWorkloads counts workloads the controller stopped re-parking
	// because another field manager keeps scaling them up.
	// +optional
	ContestedWorkloads int32 `json:"contestedWorkloads"`

	// Contested lists (at most 10 of) them.
	// +optional
	Contested []ContestedWorkload `json:"contested,omitempty"`

	// DryRun says what a DryRun NSScaler would do now.
	// +optional
	DryRun *DryRunStatus `json:"dryRun,omitempty"`

	// ParkedReplicas is spec.parkedReplicas as the last reconcile applied
	// it.
	// +optional
	ParkedReplicas int32 `json:"parkedReplicas"`

	// GracePeriod is spec.gracePeriod as the last reconcile applied it.
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`

	// AtOrBelowParkedReplicas counts the workloads of parked namespaces
	// left as they are because they run parkedReplicas or fewer.
	// +optional
	AtOrBelowParkedReplicas int32 `json:"atOrBelowParkedReplicas"`

	// WorkloadsInGrace counts the workloads of parked namespaces not parked
	// yet because they are younger than gracePeriod.
	// +optional
	WorkloadsInGrace int32 `json:"workloadsInGrace"`

	// InGrace lists them per namespace (at most 10 namespaces, by name;
	// workloadsInGrace has the full count).
	// +optional
	InGrace []NamespaceGrace `json:"inGrace,omitempty"`

	// Savings is what parking did not run (see SavingsStatus).
	// +optional
	Savings *SavingsStatus `json:"savings,omitempty"`

	// TenantWakes are the WakeRequest grants in force.
	// +optional
	TenantWakes []TenantWake `json:"tenantWakes,omitempty"`

	// SelfServiceGrants are the WakeRequest grants of the last 24 hours,
	// per namespace (what selfService.maxPerDay counts).
	// +optional
	SelfServiceGrants []SelfServiceGrants `json:"selfServiceGrants,omitempty"`
	// GitOps reports the GitOps objects paused for parked namespaces
	// (spec.gitOps).
	// +optional
	GitOps *GitOpsStatus `json:"gitOps,omitempty"`
}

// NSScaler parks every workload of the selected namespaces except a
// whitelist, recording each original replica count on the workload itself so
// that it can be restored exactly.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nss
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Asleep, Awake or Partial"
// +kubebuilder:printcolumn:name="Until",type=string,JSONPath=`.status.nextTransition`,description="When the phase next changes by itself (UTC)"
// +kubebuilder:printcolumn:name="Parked",type=integer,JSONPath=`.status.parkedNamespaceCount`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeNamespaceCount`
// +kubebuilder:printcolumn:name="Done",type=boolean,JSONPath=`.status.done`
// +kubebuilder:printcolumn:name="Why",type=string,JSONPath=`.status.reason`,description="The window, exception or setting that decides the phase"
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.spec.namespacePrefix`,priority=1
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.parkedWorkloads`,priority=1
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.podsRemaining`,priority=1
// +kubebuilder:printcolumn:name="Excluded",type=integer,JSONPath=`.status.excludedWorkloads`,priority=1
// +kubebuilder:printcolumn:name="Contested",type=integer,JSONPath=`.status.contestedWorkloads`,priority=1
// +kubebuilder:printcolumn:name="ParkTo",type=integer,JSONPath=`.status.parkedReplicas`,priority=1,description="Replicas a parked workload keeps (spec.parkedReplicas)"
// +kubebuilder:printcolumn:name="InGrace",type=integer,JSONPath=`.status.workloadsInGrace`,priority=1,description="Workloads younger than spec.gracePeriod, not parked yet"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NSScaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NSScalerSpec   `json:"spec"`
	Status NSScalerStatus `json:"status,omitempty"`
}

// NSScalerList is a list of NSScalers.
// +kubebuilder:object:root=true
type NSScalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NSScaler `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NSScaler{}, &NSScalerList{})
}
