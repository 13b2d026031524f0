package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults that the CRD applies and that the controller falls back to when a
// field is absent (for objects built in Go without the apiserver's defaulting).
const (
	DefaultSize           int32 = 1
	DefaultImage                = "docker.io/library/memcached:1.6.38-alpine"
	DefaultExporterImage        = "quay.io/prometheus/memcached-exporter:v0.15.3"
	DefaultMaxConnections int32 = 1024
	DefaultThreads        int32 = 4
	DefaultMaxItemSizeKiB int32 = 1024
	DefaultMemoryMiB      int32 = 64
	MaxSize               int32 = 100
	MemcachedPort         int32 = 11211
	ExporterPort          int32 = 9150
	MemcachedPortName           = "memcache"
	ExporterPortName            = "metrics"
	MinMemoryLimitMiB     int32 = 32
)

// WorkloadKind is the kind of the workload that runs the instances.
// +kubebuilder:validation:Enum=Deployment;StatefulSet
type WorkloadKind string

const (
	// WorkloadDeployment runs the instances as a Deployment: pod IPs in
	// status.servers.
	WorkloadDeployment WorkloadKind = "Deployment"
	// WorkloadStatefulSet runs the instances as a StatefulSet: stable names
	// in status.servers.
	WorkloadStatefulSet WorkloadKind = "StatefulSet"
)

// AntiAffinityPreset spreads the instances of one Memcached over nodes.
// +kubebuilder:validation:Enum=None;Soft;Hard
type AntiAffinityPreset string

const (
	// AntiAffinityNone adds no pod anti-affinity.
	AntiAffinityNone AntiAffinityPreset = "None"
	// AntiAffinitySoft prefers one instance per node (the default).
	AntiAffinitySoft AntiAffinityPreset = "Soft"
	// AntiAffinityHard requires one instance per node; instances that do not
	// fit stay Pending.
	AntiAffinityHard AntiAffinityPreset = "Hard"
)

// MemcachedSpec is the desired state of a Memcached cache.
//
// memoryMiB is checked against resources.limits.memory by the controller
// (Degraded, reason InvalidSpec), not by CEL: quantities inside
// corev1.ResourceRequirements have no length bound, so a CEL rule parsing
// them exceeds the apiserver's cost budget.
//
// +kubebuilder:validation:XValidation:rule="!has(self.memoryMiB) || !has(self.maxItemSizeKiB) || self.maxItemSizeKiB * 2 <= self.memoryMiB * 1024",message="maxItemSizeKiB must be at most half of memoryMiB (memcached refuses to start otherwise)"
// +kubebuilder:validation:XValidation:rule="!has(self.antiAffinity) || self.antiAffinity == 'None' || !has(self.affinity) || !has(self.affinity.podAntiAffinity)",message="set either the antiAffinity preset or affinity.podAntiAffinity, not both (use antiAffinity: None with a custom podAntiAffinity)"
// +kubebuilder:validation:XValidation:rule="!has(self.exporter) || !has(self.exporter.serviceMonitor) || !self.exporter.serviceMonitor.enabled || self.exporter.enabled",message="exporter.serviceMonitor.enabled requires exporter.enabled"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.exporter) || !self.exporter.enabled",message="auth cannot be combined with exporter.enabled: the memcached exporter cannot authenticate (it speaks neither memcached's ASCII auth nor SASL); restrict clients with tls.clientCA instead, which the exporter satisfies"
// +kubebuilder:validation:XValidation:rule="!has(self.warmRestart) || !self.warmRestart || !has(self.extraArgs) || !self.extraArgs.exists(a, a.matches('^(-[ACFLMWXkr]*e|--memory-f(i(le?)?)?(=|$))'))",message="warmRestart manages memcached's memory file: extraArgs must not set -e/--memory-file with it"
// +kubebuilder:validation:XValidation:rule="!has(self.warmRestart) || !self.warmRestart || !has(self.memoryMiB) || self.memoryMiB >= 39",message="warmRestart needs memoryMiB of at least 39: memcached preallocates a 1 MiB page per slab class on its memory file"
// +kubebuilder:validation:XValidation:rule="!has(self.preStopDelaySeconds) || self.preStopDelaySeconds < (has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30)",message="preStopDelaySeconds must be shorter than terminationGracePeriodSeconds (30 when unset): the delay counts against the grace period"
type MemcachedSpec struct {
	// WorkloadKind runs the instances as a Deployment (the default) or as a
	// StatefulSet, whose instances have stable DNS names
	// (<name>-<ordinal>.<name>.<namespace>.svc), listed in status.servers
	// for clients that hash by name. It cannot be changed later: create a
	// Memcached of the other kind and move the clients over.
	// +kubebuilder:default=Deployment
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workloadKind cannot be changed; create a new Memcached with the other kind and move the clients (see docs/memcached.md)"
	// +optional
	WorkloadKind WorkloadKind `json:"workloadKind,omitempty"`

	// Size is the number of memcached instances. 0 parks the cache (no pods,
	// the objects stay). The controller never runs more than Size instances,
	// also not during a rollout.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Size *int32 `json:"size,omitempty"`

	// Image is the memcached container image. It must run memcached when
	// given only flags as arguments, as the official image does.
	// +kubebuilder:default="docker.io/library/memcached:1.6.38-alpine"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the memcached and exporter containers.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// MemoryMiB is the item memory of each instance (memcached -m). When
	// absent it is derived from resources.limits.memory minus headroom for
	// connections and the hash table (10%, at least 16 MiB), or 64 without a
	// memory limit. It must leave that headroom below the memory limit;
	// without a limit the controller sets one: memoryMiB plus the headroom.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryMiB *int32 `json:"memoryMiB,omitempty"`

	// MaxConnections is the connection limit of each instance (memcached -c).
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxConnections int32 `json:"maxConnections,omitempty"`

	// Threads is the number of worker threads (memcached -t).
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Threads int32 `json:"threads,omitempty"`

	// MaxItemSizeKiB is the largest item memcached stores, in KiB
	// (memcached -I). It must be at most half of the item memory.
	// +kubebuilder:default=1024
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MaxItemSizeKiB int32 `json:"maxItemSizeKiB,omitempty"`

	// Verbosity is memcached's log verbosity: 0 quiet, 1 -v, 2 -vv, 3 -vvv.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3
	// +optional
	Verbosity int32 `json:"verbosity,omitempty"`

	// ExtraArgs are appended to the memcached command line, which reads
	// them with getopt: bundled short options ("-Mm64"), attached values,
	// "--name=value" and "--name value", and unambiguous prefixes of long
	// names ("--threa=8") all count. Options the controller manages (port,
	// listen address, memory, connections, threads, item size, verbosity,
	// user, daemon mode, sockets) or reserves (-Z TLS, -S SASL, -Y auth
	// file, -h -i -V) are rejected, as are the -o sub-options spec.tls sets;
	// set the matching field instead. The CRD refuses the plain cases; the
	// controller reads the whole command line as memcached does and reports
	// the rest as Degraded/InvalidSpec without applying anything.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^(-[ACFLMWXkr]*[IPSUVYZacdhilmpstuv]|--(a(u(t(h(-(f(i(le?)?)?)?)?)?)?)?|c(o(n(n(-(l(i(m(it?)?)?)?)?)?)?)?)?|da(e(m(on?)?)?)?|enable-sa(sl?)?|enable-ssl?|h(e(lp?)?)?|lic(e(n(se?)?)?)?|listen|max-i(t(e(m(-(s(i(ze?)?)?)?)?)?)?)?|memory-l(i(m(it?)?)?)?|pi(d(f(i(le?)?)?)?)?|po(rt?)?|t(h(r(e(a(ds?)?)?)?)?)?|ud(p(-(p(o(rt?)?)?)?)?)?|unix-m(a(sk?)?)?|unix-s(o(c(k(et?)?)?)?)?|us(er?)?|verb(o(se?)?)?|vers(i(on?)?)?)(=|$))'))",message="extraArgs must not set options the controller manages or reserves (-p -U -l -m -c -t -I -v -d -u -s -a -P -Z -S -Y -h -i -V, also bundled as in -Mm64, and their long forms or unambiguous prefixes such as --threa); use the matching spec field"
	// +listType=atomic
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// Resources of the memcached container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector constrains the nodes the instances run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the instances.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the instances. A podAntiAffinity here replaces the
	// antiAffinity preset.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// AntiAffinity is a preset that spreads the instances over nodes:
	// Soft (the default when affinity.podAntiAffinity is not set) prefers
	// one instance per node, Hard requires it, None adds nothing.
	// +optional
	AntiAffinity AntiAffinityPreset `json:"antiAffinity,omitempty"`

	// TopologySpreadConstraints of the instances. A constraint without a
	// labelSelector gets the selector of this cache's pods.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PodDisruptionBudget limits voluntary disruptions of the instances.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// PriorityClassName of the instances.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// MinReadySeconds a new instance must be ready before it counts as
	// available (and the rollout moves on).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// Exporter adds a Prometheus memcached exporter sidecar.
	// +optional
	Exporter *ExporterSpec `json:"exporter,omitempty"`

	// TLS makes memcached accept only TLS connections, with the
	// certificate of a kubernetes.io/tls Secret (what cert-manager writes),
	// optionally requiring client certificates.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth makes memcached require a user and password (memcached's ASCII
	// protocol authentication, -Y) from a Secret.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// NetworkPolicy admits only the given clients (and the exporter's
	// scrapers) to the instances.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// WarmRestart keeps the items across a restart of the memcached
	// container: memcached keeps its item memory in a file on a
	// memory-backed volume (memcached -e) and saves it when stopped with
	// SIGUSR1. See warmrestart_types.go and docs/memcached.md.
	// +optional
	WarmRestart bool `json:"warmRestart,omitempty"`

	PodOverrides `json:",inline"`
}

// PodDisruptionBudgetSpec configures the PodDisruptionBudget of a cache.
type PodDisruptionBudgetSpec struct {
	// Enabled creates the PodDisruptionBudget. When absent it is created
	// only when size > 1.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// MaxUnavailable instances during voluntary disruptions: a number >= 1
	// or a percentage such as "25%".
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="maxUnavailable must be an integer >= 1 or a percentage between 1% and 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// ExporterSpec configures the Prometheus memcached exporter sidecar.
type ExporterSpec struct {
	// Enabled adds the exporter container (port 9150, named metrics) to
	// every instance and the metrics port to the Service.
	Enabled bool `json:"enabled"`

	// Image of the exporter.
	// +kubebuilder:default="quay.io/prometheus/memcached-exporter:v0.15.3"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	Image string `json:"image,omitempty"`

	// Resources of the exporter container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ServiceMonitor creates a prometheus-operator ServiceMonitor for the
	// exporter, when that CRD is installed in the cluster.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
}

// ServiceMonitorSpec configures the optional ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled creates the ServiceMonitor.
	Enabled bool `json:"enabled"`

	// Interval between scrapes, e.g. 30s.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels added to the ServiceMonitor, e.g. the label a Prometheus
	// selects ServiceMonitors by.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// Condition types of a Memcached.
const (
	// ConditionAvailable is True when every requested instance is ready
	// (and has been for minReadySeconds).
	ConditionAvailable = "Available"
	// ConditionProgressing is True while a rollout or scale is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the controller cannot reach the
	// desired state without help: a foreign object, an invalid spec, an
	// apiserver error, or a stuck rollout.
	ConditionDegraded = "Degraded"
)

// Condition reasons of a Memcached. Available and Progressing describe the
// instances; Degraded says why the controller cannot make progress on its
// own.
const (
	// Available.
	ReasonAllInstancesAvailable = "AllInstancesAvailable"
	ReasonInstancesUnavailable  = "InstancesUnavailable"
	// ReasonParked (Available and Progressing): size is 0.
	ReasonParked            = "Parked"
	ReasonDeploymentMissing = "DeploymentMissing"
	// ReasonStatefulSetMissing: workloadKind StatefulSet and no owned
	// StatefulSet.
	ReasonStatefulSetMissing = "StatefulSetMissing"

	// Progressing.
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonScalingUp                = "ScalingUp"
	ReasonScalingDown              = "ScalingDown"
	ReasonRollingOut               = "RollingOut"
	ReasonWaitingForReadiness      = "WaitingForReadiness"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonBlocked: the controller cannot apply the spec; Degraded says why.
	ReasonBlocked = "Blocked"

	// Degraded.
	ReasonAsExpected = "AsExpected"
	// ReasonInvalidSpec: a combination only the controller can check (the
	// memory limit against memoryMiB and maxItemSizeKiB); nothing is applied.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonForeignObject: an object with the Memcached's name is not
	// controlled by it; the controller leaves it alone.
	ReasonForeignObject  = "ForeignObject"
	ReasonApplyFailed    = "ApplyFailed"
	ReasonRolloutStuck   = "RolloutStuck"
	ReasonReplicaFailure = "ReplicaFailure"
	// ReasonServiceMonitorUnsupported: a ServiceMonitor is asked for but the
	// cluster has no ServiceMonitor kind (prometheus-operator is not
	// installed).
	ReasonServiceMonitorUnsupported = "ServiceMonitorUnsupported"
	// ReasonSecretNotUsable: a Secret the spec names (tls, tls.clientCA,
	// auth, imagePullSecrets) does not exist, lacks the UsableLabel, or
	// lacks a key it needs; nothing is applied.
	ReasonSecretNotUsable = "SecretNotUsable"
	// ReasonFingerprintKeyUnavailable: the key that fingerprints the
	// Secrets' data (for rollouts on rotation) cannot be read; nothing is
	// applied until it can.
	ReasonFingerprintKeyUnavailable = "FingerprintKeyUnavailable"
)

// Event reasons, on the Memcached.
const (
	EventCreated        = "Created"
	EventScaled         = "Scaled"
	EventConfigRollout  = "ConfigRollout"
	EventDriftCorrected = "DriftCorrected"
	EventDeleted        = "Deleted"
	// EventForeignObject and EventInvalidSpec are Warnings, on the
	// transition into Degraded with the reason of the same name.
	EventForeignObject = "ForeignObject"
	EventInvalidSpec   = "InvalidSpec"
	// EventSecretNotUsable (Warning) on the transition into
	// Degraded/SecretNotUsable.
	EventSecretNotUsable = "SecretNotUsable"
	// EventSecretRotated: the data of a TLS or auth Secret changed; the
	// instances are replaced one at a time to load it.
	EventSecretRotated = "SecretRotated"
)

// MemcachedStatus is the observed state of a Memcached cache.
type MemcachedStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of instances (pods) that exist.
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of ready instances.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// Selector is the label selector of the instances, for the scale
	// subresource (autoscalers).
	// +optional
	Selector string `json:"selector,omitempty"`

	// ServiceName is the headless Service that resolves to the ready
	// instances.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// Servers are the host:port addresses of the ready instances: for a
	// Deployment their pod IPs, sorted; for a StatefulSet their stable
	// names <name>-<ordinal>.<service>.<namespace>.svc, in ordinal order.
	// The server list of a client-side consistent-hashing client.
	// +listType=atomic
	// +optional
	Servers []string `json:"servers,omitempty"`

	// TLS is true when the instances' pod template requires TLS, false
	// when it does not; absent while there is no workload yet.
	// +optional
	TLS *bool `json:"tls,omitempty"`

	// Auth is true when the instances' pod template requires
	// authentication, false when it does not; absent while there is no
	// workload yet.
	// +optional
	Auth *bool `json:"auth,omitempty"`

	// TLSCertificate is the serving certificate of spec.tls and how its
	// last renewal reached the instances; absent without TLS.
	// +optional
	TLSCertificate *CertificateStatus `json:"tlsCertificate,omitempty"`

	// IssuedCertificate is the cert-manager Certificate the controller
	// owns for spec.tls.issuerRef; absent without one.
	// +optional
	IssuedCertificate *IssuedCertificateStatus `json:"issuedCertificate,omitempty"`

	// Conditions: Available, Progressing, Degraded, and CertificateReady
	// with tls.issuerRef.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastRestart is the latest restart of a memcached container of a
	// Memcached with warmRestart, and whether it kept the items.
	// +optional
	LastRestart *RestartStatus `json:"lastRestart,omitempty"`
}

// Memcached runs a memcached cache: a Deployment (or StatefulSet) of size
// instances, a headless Service, a PodDisruptionBudget and optionally a
// NetworkPolicy, all owned by this object.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=mc,categories=runbook
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="TLS",type=boolean,JSONPath=`.status.tls`
// +kubebuilder:printcolumn:name="Auth",type=boolean,JSONPath=`.status.auth`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.workloadKind`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most 63 characters): it names the Service and labels the pods"
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MemcachedSpec `json:"spec,omitempty"`
	// +optional
	Status MemcachedStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MemcachedList is a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
