package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// RestartedAtAnnotation is set on spec.template.metadata.annotations of a
// target to restart it, the way `kubectl rollout restart` sets
// kubectl.kubernetes.io/restartedAt. Its value (RFC 3339) is also the time of
// the target's last restart, which the cooldown reads.
const RestartedAtAnnotation = "autoreboot.runbook.dev/restartedAt"

// RestartIDAnnotation is set on a target's own metadata in the same patch
// as RestartedAtAnnotation. Its value ("<rebootpolicy>/<hash>") names the
// trigger the restart was made for, so that a restart whose status write
// was lost (a leader killed in between) is recognised and not repeated.
const RestartIDAnnotation = "autoreboot.runbook.dev/restart-id"

// Condition types.
const (
	// ConditionReady is True when every policy has a running trigger and the
	// target exists and can be restarted.
	ConditionReady = "Ready"
	// ConditionDegraded is True when something keeps a policy or the restart
	// from working; its reason says what.
	ConditionDegraded = "Degraded"
)

// Condition reasons (also the reason of a policy's Error result).
const (
	ReasonReconciled        = "Reconciled"
	ReasonSuspended         = "Suspended"
	ReasonTargetNotFound    = "TargetNotFound"
	ReasonTargetPaused      = "TargetPaused"
	ReasonTargetOnDelete    = "TargetOnDelete"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonProbeError        = "ProbeError"
	ReasonExecNotAllowed    = "ExecNotAllowed"
	ReasonWatchedNotFound   = "WatchedObjectNotFound"
	ReasonRestartFailed     = "RestartFailed"
	ReasonAsExpected        = "AsExpected"
	ReasonRestartPending    = "RestartPending"
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonInvalidSpec: the spec passed the CRD's validation but the
	// controller cannot use it (e.g. a probe header Go refuses to send).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotUsable: the Secret does not exist or lacks the
	// UsableLabel. One reason for both, so that a policy cannot probe which
	// Secrets exist.
	ReasonSecretNotUsable = "SecretNotUsable"
	// ReasonAddressNotAllowed: the manager's network policy refused the
	// address a probe or database connection resolved to.
	ReasonAddressNotAllowed = "AddressNotAllowed"
	// ReasonDSNNotAllowed: the DSN sets a parameter the manager refuses
	// (one that reads files or widens what a statement can do).
	ReasonDSNNotAllowed = "DSNNotAllowed"
	// ReasonDSNTooPowerful: the DSN's database user may act outside the
	// database's own data (superuser, server files or programs, FILE,
	// SUPER, PROCESS, write privileges) and the admin did not allow such
	// users (--sql-allow-powerful-users).
	ReasonDSNTooPowerful = "DSNTooPowerful"
	// ReasonInvalidDSN: the driver cannot parse the DSN.
	ReasonInvalidDSN = "InvalidDSN"
	// ReasonQueryFailed: the database could not run the query.
	ReasonQueryFailed = "QueryFailed"
	// ReasonQueryNotAllowed: the statement is not a read-only query (the
	// read-only transaction or the server's grammar refused it).
	ReasonQueryNotAllowed = "QueryNotAllowed"
	// ReasonAuthenticationFailed: the database refused the DSN's credentials.
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonResultTooLarge: the result exceeded the manager's row or byte bounds.
	ReasonResultTooLarge = "ResultTooLarge"
	// ReasonConnectFailed: the database could not be reached.
	ReasonConnectFailed = "ConnectFailed"
	// ReasonTimeout: the query did not finish within timeoutSeconds.
	ReasonTimeout = "Timeout"
	// ReasonPeriodBelowMinimum: the policy's period is shorter than the
	// manager's --probe-min-period; the policy does not run.
	ReasonPeriodBelowMinimum = "PeriodBelowMinimum"
	// ReasonTooManyProbes: the namespace already runs the manager's
	// --probe-max-per-namespace policies; this one does not run.
	ReasonTooManyProbes = "TooManyProbes"
	// ReasonFingerprintKeyUnavailable: the manager could not read or create
	// the key its fingerprints are computed with.
	ReasonFingerprintKeyUnavailable = "FingerprintKeyUnavailable"
	// ReasonTooManyReferences: a referenced trigger's targets reference
	// more objects, or the trigger has more targets, than the manager's
	// --referenced-max-* limits allow; it does not fire.
	ReasonTooManyReferences = "TooManyReferences"
	// ReasonReferenceNotFound: a referenced object does not exist (a
	// policy note; the trigger keeps working for the others).
	ReasonReferenceNotFound = "ReferenceNotFound"
	// ReasonInvalidSchedule: spec.restartSchedule cannot be evaluated (a
	// time zone the manager's database does not know); no restart is made
	// until it is fixed. NSScaler uses the same reason for its schedule.
	ReasonInvalidSchedule = weeklyv1alpha1.ReasonInvalidSchedule
	// ReasonOutsideWindow (Ready, True): a restart waits for a window.
	ReasonOutsideWindow = "OutsideRestartWindow"
	// ReasonSettling (Ready, True): a restart waits for the settle delay.
	ReasonSettling = "Settling"
	// ReasonThrottled (Ready, True): a restart waits for the manager's
	// --max-concurrent-restarts or spec.rollout.maxConcurrent.
	ReasonThrottled = "Throttled"
)

// Event reasons, on the RebootPolicy and on its targets.
const (
	EventRestarted      = "Restarted"
	EventRestartSkipped = "RestartSkipped"
	EventRestartFailed  = "RestartFailed"
	EventProbeFailed    = "ProbeFailed"
	EventTriggered      = "Triggered"
	// EventRestartRequested: the restart-request annotation was taken.
	EventRestartRequested = "RestartRequested"
	// EventRestartRequestInvalid: the annotation's value is too long.
	EventRestartRequestInvalid = "RestartRequestInvalid"
	// EventNotificationFailed: a webhook message could not be delivered
	// after its retries (or was refused: Secret, URL, network policy).
	EventNotificationFailed = "NotificationFailed"
	// EventReferenceMissing: a referenced ConfigMap or Secret does not
	// exist (or a Secret is not labelled usable).
	EventReferenceMissing = "ReferenceMissing"
)

// UsableLabel opts a Secret in: a RebootPolicy may use it as a DSN or
// watch it only when the Secret carries this label with value "true". It
// is set by whoever may write Secrets in the namespace, so that anyone who
// may merely create RebootPolicies cannot make the manager use a Secret
// they could not read.
const UsableLabel = "autoreboot.runbook.dev/usable"

// Policy results as shown in status.policies[].lastResult.
const (
	// ResultSuccess: the probe succeeded, or the query / watched object was
	// read and matches the baseline.
	ResultSuccess = "Success"
	// ResultFailure: the probe failed (the target is unhealthy).
	ResultFailure = "Failure"
	// ResultChanged: the query result or watched data differs from the baseline.
	ResultChanged = "Changed"
	// ResultError: the trigger could not be evaluated (configuration or
	// access problem); an error never restarts the target.
	ResultError = "Error"
)

// TargetKind is the kind of workload a RebootPolicy restarts.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;Rollout
type TargetKind string

// Target kinds.
const (
	KindDeployment  TargetKind = "Deployment"
	KindStatefulSet TargetKind = "StatefulSet"
	KindDaemonSet   TargetKind = "DaemonSet"
)

// TargetRef names the workloads to restart, in the RebootPolicy's namespace.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="target: set exactly one of name or selector"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || (self.kind == 'Rollout') == (self.apiVersion == 'argoproj.io/v1alpha1')",message="target.apiVersion must be argoproj.io/v1alpha1 for kind Rollout and apps/v1 for the other kinds"
type TargetRef struct {
	// APIVersion of the target: apps/v1, or argoproj.io/v1alpha1 for an
	// Argo Rollouts Rollout.
	// +kubebuilder:validation:Enum=apps/v1;argoproj.io/v1alpha1
	// +kubebuilder:default="apps/v1"
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the target workload.
	Kind TargetKind `json:"kind"`

	// Name of one workload to restart.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`

	// Selector restarts every workload of Kind in the namespace whose labels
	// match. It must not be empty.
	// +optional
	Selector *TargetSelector `json:"selector,omitempty"`
}

// SQLDriver is the database driver of an sql trigger.
// +kubebuilder:validation:Enum=mysql;postgres
type SQLDriver string

// SQL drivers.
const (
	DriverMySQL    SQLDriver = "mysql"
	DriverPostgres SQLDriver = "postgres"
)

// SecretKeySelector names a key of a Secret in the RebootPolicy's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SQLTrigger runs a query periodically and fires when its result set differs
// from the last one seen. The first result only sets the baseline.
// +kubebuilder:validation:XValidation:rule="self.timeoutSeconds <= self.periodSeconds",message="sql: timeoutSeconds must not exceed periodSeconds"
type SQLTrigger struct {
	// Driver is mysql (MySQL, MariaDB) or postgres.
	Driver SQLDriver `json:"driver"`
	// DSNSecretRef names the Secret key holding the data source name
	// (go-sql-driver/mysql DSN, or a PostgreSQL URL / keyword string).
	DSNSecretRef SecretKeySelector `json:"dsnSecretRef"`
	// Query whose complete result set is fingerprinted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
	// PeriodSeconds between two queries.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=30
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// TimeoutSeconds bounds one query, connection included.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=5
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// WatchKind is the kind of object a watch trigger observes.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type WatchKind string

// Watch kinds.
const (
	WatchConfigMap WatchKind = "ConfigMap"
	WatchSecret    WatchKind = "Secret"
)

// WatchTrigger fires when the data of a ConfigMap or Secret in the
// RebootPolicy's namespace changes. The first observation sets the baseline.
type WatchTrigger struct {
	// Kind of the watched object.
	Kind WatchKind `json:"kind"`
	// Name of the watched object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Keys limits the comparison to these data keys; empty means all keys.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Keys []string `json:"keys,omitempty"`
	// PeriodSeconds between two reads of the object.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=10
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
}

// Trigger decides when a policy restarts the target. Exactly one of probe,
// sql, watch or referenced is set.
// +kubebuilder:validation:XValidation:rule="[has(self.probe), has(self.sql), has(self.watch), has(self.referenced)].filter(x, x).size() == 1",message="trigger: set exactly one of probe, sql, watch or referenced"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || !has(self.probe.grpc) || (has(self.probeHost) && size(self.probeHost) > 0)",message="trigger.probeHost is required for a grpc probe"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || !has(self.probe.httpGet) || (has(self.probe.httpGet.host) && size(self.probe.httpGet.host) > 0) || (has(self.probeHost) && size(self.probeHost) > 0)",message="probe.httpGet.host (or trigger.probeHost) is required: there is no pod IP to default to"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || !has(self.probe.tcpSocket) || (has(self.probe.tcpSocket.host) && size(self.probe.tcpSocket.host) > 0) || (has(self.probeHost) && size(self.probeHost) > 0)",message="probe.tcpSocket.host (or trigger.probeHost) is required: there is no pod IP to default to"
type Trigger struct {
	// ProbeHost is the host a grpc probe connects to (GRPCAction has no
	// host field), and the default host of httpGet and tcpSocket probes.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ProbeHost string `json:"probeHost,omitempty"`
	// Probe fires after failureThreshold consecutive failures. The handler
	// is one of httpGet, tcpSocket, grpc (probed at probeHost) or exec (a
	// script in the manager's --exec-probe-dir, when that is enabled).
	// +kubebuilder:validation:XValidation:rule="[has(self.exec), has(self.httpGet), has(self.tcpSocket), has(self.grpc)].filter(x, x).size() == 1",message="probe: set exactly one of exec, httpGet, tcpSocket or grpc"
	// +kubebuilder:validation:XValidation:rule="!has(self.httpGet) || type(self.httpGet.port) == int",message="probe.httpGet.port must be a number (named ports need a pod)"
	// +kubebuilder:validation:XValidation:rule="!has(self.tcpSocket) || type(self.tcpSocket.port) == int",message="probe.tcpSocket.port must be a number (named ports need a pod)"
	// +kubebuilder:validation:XValidation:rule="!has(self.httpGet) || type(self.httpGet.port) != int || (self.httpGet.port >= 1 && self.httpGet.port <= 65535)",message="probe.httpGet.port must be between 1 and 65535"
	// +kubebuilder:validation:XValidation:rule="!has(self.tcpSocket) || type(self.tcpSocket.port) != int || (self.tcpSocket.port >= 1 && self.tcpSocket.port <= 65535)",message="probe.tcpSocket.port must be between 1 and 65535"
	// +kubebuilder:validation:XValidation:rule="!has(self.grpc) || (self.grpc.port >= 1 && self.grpc.port <= 65535)",message="probe.grpc.port must be between 1 and 65535"
	// +kubebuilder:validation:XValidation:rule="!has(self.httpGet) || !has(self.httpGet.scheme) || self.httpGet.scheme in ['HTTP', 'HTTPS']",message="probe.httpGet.scheme must be HTTP or HTTPS"
	// +kubebuilder:validation:XValidation:rule="!has(self.exec) || (has(self.exec.command) && size(self.exec.command) > 0)",message="probe.exec.command must name a script"
	// +kubebuilder:validation:XValidation:rule="!has(self.periodSeconds) || (self.periodSeconds >= 1 && self.periodSeconds <= 86400)",message="probe.periodSeconds must be between 1 and 86400"
	// +kubebuilder:validation:XValidation:rule="!has(self.timeoutSeconds) || (self.timeoutSeconds >= 1 && self.timeoutSeconds <= 300)",message="probe.timeoutSeconds must be between 1 and 300"
	// +kubebuilder:validation:XValidation:rule="!has(self.failureThreshold) || (self.failureThreshold >= 1 && self.failureThreshold <= 1000)",message="probe.failureThreshold must be between 1 and 1000"
	// +kubebuilder:validation:XValidation:rule="!has(self.successThreshold) || (self.successThreshold >= 1 && self.successThreshold <= 1000)",message="probe.successThreshold must be between 1 and 1000"
	// +kubebuilder:validation:XValidation:rule="!has(self.initialDelaySeconds) || (self.initialDelaySeconds >= 0 && self.initialDelaySeconds <= 86400)",message="probe.initialDelaySeconds must be between 0 and 86400"
	// +optional
	Probe *corev1.Probe `json:"probe,omitempty"`
	// SQL fires when a query's result set changes.
	// +optional
	SQL *SQLTrigger `json:"sql,omitempty"`
	// Watch fires when a ConfigMap's or Secret's data changes.
	// +optional
	Watch *WatchTrigger `json:"watch,omitempty"`
	// Referenced fires for a target when a ConfigMap or Secret its pod
	// template references changes.
	// +optional
	Referenced *ReferencedTrigger `json:"referenced,omitempty"`
}

// Policy is one named trigger for restarting the target.
type Policy struct {
	// Name identifies the policy within the RebootPolicy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Comment for humans.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Comment string `json:"comment,omitempty"`
	// Trigger of the policy.
	Trigger Trigger `json:"trigger"`
}

// RebootPolicySpec is the desired behaviour of a RebootPolicy.
type RebootPolicySpec struct {
	// Target names the workloads to restart.
	Target TargetRef `json:"target"`

	// Policies are the triggers; any of them firing restarts the target.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Policies []Policy `json:"policies"`

	// MinRestartInterval is the cooldown per target: no second restart
	// within it. A trigger during the cooldown is remembered and acted on
	// afterwards.
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="minRestartInterval must be between 0s and 168h"
	// +optional
	MinRestartInterval *metav1.Duration `json:"minRestartInterval,omitempty"`

	// Suspend stops every trigger and restart while true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// SettleDelay: a fire of a change trigger (sql, watch, referenced)
	// waits until no further change has been seen for this long, so that a
	// burst of related edits restarts once. Probe fires do not wait.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="settleDelay must be between 0s and 24h"
	// +optional
	SettleDelay *metav1.Duration `json:"settleDelay,omitempty"`

	// RestartSchedule: restarts are made only inside its windows (the
	// weekly schedule both kinds share: timeZone and windows, see
	// docs/rebootpolicy.md, "Restart windows"); a fire outside them stays
	// pending and is acted on when the next window opens. Unset means at
	// any time.
	// +kubebuilder:validation:XValidation:rule="has(self.windows) && size(self.windows) > 0",message="a restartSchedule needs at least one window; leave it out to restart at any time"
	// +optional
	RestartSchedule *weeklyv1alpha1.Schedule `json:"restartSchedule,omitempty"`

	// Rollout governs how many targets restart at once.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// Notify sends a message per restart or skipped restart.
	// +optional
	Notify *NotifySpec `json:"notify,omitempty"`

	// Approval Required keeps every pending restart waiting until
	// `kubectl runbook approve` (the approve annotation); Automatic (the
	// default) restarts as the rules allow.
	// +kubebuilder:default=Automatic
	// +optional
	Approval ApprovalMode `json:"approval,omitempty"`

	// BlockingAlerts holds pending restarts while any of these Prometheus
	// alerts fires for this RebootPolicy's namespace (a firing ALERTS
	// series whose namespace label is the policy's own), as the Prometheus
	// of the manager's --prometheus-url answers. A Prometheus that cannot
	// be asked holds them too (AlertsUnavailable); so does a manager
	// without --prometheus-url (AlertsNotConfigured).
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	BlockingAlerts []AlertName `json:"blockingAlerts,omitempty"`
}

// PolicyStatus is the observed state of one policy. It is written on
// transitions only (result changes, trigger, baseline change), not per probe.
type PolicyStatus struct {
	// Name of the policy.
	Name string `json:"name"`
	// LastResult is Success, Failure, Changed or Error.
	// +optional
	LastResult string `json:"lastResult,omitempty"`
	// Reason is a CamelCase reason for an Error result.
	// +optional
	Reason string `json:"reason,omitempty"`
	// ConsecutiveFailures as of the last transition.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// LastTriggerTime is when this policy last fired.
	// +optional
	LastTriggerTime *metav1.Time `json:"lastTriggerTime,omitempty"`
	// Message is a short human-readable note (never contains a DSN).
	// +optional
	Message string `json:"message,omitempty"`
	// Fingerprint is a keyed hash (HMAC-SHA256 with a key only the manager
	// holds, prefixed by the key's id) of the last query result set or
	// watched data (sql and watch triggers): the baseline that survives
	// restarts of the operator, and reveals nothing about the data.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
	// TriggerHash identifies the trigger spec the fingerprint belongs to;
	// a changed query or watched object starts a new baseline.
	// +optional
	TriggerHash string `json:"triggerHash,omitempty"`
	// PendingTrigger is true when the policy fired and the restart waits
	// for the cooldown or a running rollout.
	// +optional
	PendingTrigger bool `json:"pendingTrigger,omitempty"`
	// LastChangeTime is when the latest fire merged into the pending
	// trigger was seen: the settle delay counts from it.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// LastChange names what the last fire of a watch trigger was about
	// (and the fires merged into its pending restart): the ConfigMap or
	// Secret and the keys that changed, were added or removed — names
	// only, never values.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastChange string `json:"lastChange,omitempty"`
	// Targets are the per-target baselines and pending changes of a
	// referenced trigger.
	// +listType=map
	// +listMapKey=name
	// +optional
	Targets []ReferencedTargetStatus `json:"targets,omitempty"`
}

// RebootPolicyStatus is the observed state of a RebootPolicy.
type RebootPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// RestartCount counts the restarts this RebootPolicy performed.
	// +optional
	RestartCount int64 `json:"restartCount,omitempty"`
	// LastRestartTime is when this RebootPolicy last restarted its target.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// Policies is the state of each policy.
	// +listType=map
	// +listMapKey=name
	// +optional
	Policies []PolicyStatus `json:"policies,omitempty"`
	// LastRestartRequest is the value of the restart-request annotation
	// last taken (recorded together with the pending restart it asks for).
	// +optional
	LastRestartRequest string `json:"lastRestartRequest,omitempty"`
	// RestartRequestPending: the request in lastRestartRequest has not been
	// carried out yet (window, throttle, cooldown or rollout).
	// +optional
	RestartRequestPending bool `json:"restartRequestPending,omitempty"`
	// RestartRequestTime is when lastRestartRequest was taken.
	// +optional
	RestartRequestTime *metav1.Time `json:"restartRequestTime,omitempty"`
	// PendingRestarts counts the targets waiting for a restart (settle
	// delay, window, throttle, cooldown, rollout) as of the last status
	// write.
	// +optional
	PendingRestarts int32 `json:"pendingRestarts,omitempty"`
	// NextRestartTime is the earliest time a pending restart may be made
	// when it waits for the settle delay or a restart window.
	// +optional
	NextRestartTime *metav1.Time `json:"nextRestartTime,omitempty"`
	// Rollout is the health gate of a sequence (spec.rollout.maxConcurrent).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Approval records approvals (spec.approval Required).
	// +optional
	Approval *ApprovalStatus `json:"approval,omitempty"`
	// BlockingAlerts says why pending restarts wait for the alerts gate
	// (spec.blockingAlerts); unset while they do not.
	// +optional
	BlockingAlerts *BlockingAlertsStatus `json:"blockingAlerts,omitempty"`
}

// RebootPolicy restarts a workload (like `kubectl rollout restart`) when one
// of its triggers fires: a failing probe, a changed SQL result or a changed
// ConfigMap/Secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rbp
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.name`
// +kubebuilder:printcolumn:name="Policies",type=string,JSONPath=`.spec.policies[*].name`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restartCount`
// +kubebuilder:printcolumn:name="Last Restart",type=date,JSONPath=`.status.lastRestartTime`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingRestarts`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RebootPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RebootPolicySpec   `json:"spec"`
	Status RebootPolicyStatus `json:"status,omitempty"`
}

// RebootPolicyList is a list of RebootPolicy.
// +kubebuilder:object:root=true
type RebootPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RebootPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RebootPolicy{}, &RebootPolicyList{})
}
