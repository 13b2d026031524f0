package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// The types of this file carry only what the Pod Security "restricted"
// level allows: a field that could grant privilege (privileged,
// allowPrivilegeEscalation, added capabilities other than
// NET_BIND_SERVICE, host namespaces, ports or paths, runAsNonRoot false,
// Unconfined profiles) has no place in them, so the apiserver refuses it
// (strict field validation) or drops it (pruning) and it is never
// rendered. The controller adds what restricted requires
// (allowPrivilegeEscalation false, runAsNonRoot true, capabilities drop
// ALL) to every container it renders.

// ProfileType is the type of a seccomp or AppArmor profile: the runtime's
// default or one loaded on the node. Unconfined is not allowed.
// +kubebuilder:validation:Enum=RuntimeDefault;Localhost
type ProfileType string

const (
	ProfileRuntimeDefault ProfileType = "RuntimeDefault"
	ProfileLocalhost      ProfileType = "Localhost"
)

// Profile is a seccomp or AppArmor profile.
// +kubebuilder:validation:XValidation:rule="(self.type == 'Localhost') == has(self.localhostProfile)",message="localhostProfile is required for type Localhost and only allowed there"
type Profile struct {
	Type ProfileType `json:"type"`
	// LocalhostProfile is the profile's name (AppArmor) or path below the
	// kubelet's seccomp directory (seccomp).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.startsWith('/')",message="localhostProfile must be relative and without '..'"
	// +optional
	LocalhostProfile *string `json:"localhostProfile,omitempty"`
}

// PodSecurity is the part of the pod's securityContext that users may set
// within the restricted level. Unset fields keep the controller's
// defaults: runAsUser and runAsGroup 11211 (the official image's
// memcache user), fsGroup 11211 when the pod has volumes, seccomp
// RuntimeDefault. runAsNonRoot is always true.
type PodSecurity struct {
	// RunAsUser of every container (not root).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup of every container.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// FSGroup owns the pod's volumes (and is a supplementary group of
	// every container); the TLS and auth files are readable by it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	FSGroup *int64 `json:"fsGroup,omitempty"`
	// FSGroupChangePolicy: OnRootMismatch (the default) or Always.
	// +kubebuilder:validation:Enum=OnRootMismatch;Always
	// +optional
	FSGroupChangePolicy *corev1.PodFSGroupChangePolicy `json:"fsGroupChangePolicy,omitempty"`
	// SupplementalGroups of every container.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=2147483647
	// +listType=atomic
	// +optional
	SupplementalGroups []int64 `json:"supplementalGroups,omitempty"`
	// SeccompProfile of the pod (RuntimeDefault by default).
	// +optional
	SeccompProfile *Profile `json:"seccompProfile,omitempty"`
	// AppArmorProfile of the pod.
	// +optional
	AppArmorProfile *Profile `json:"appArmorProfile,omitempty"`
	// HostUsers false runs the pod in its own user namespace (container
	// root is not root on the node). Only false may be set: the default
	// is the node's user namespace.
	// +kubebuilder:validation:XValidation:rule="self == false",message="hostUsers may only be set to false (a user namespace of the pod's own)"
	// +optional
	HostUsers *bool `json:"hostUsers,omitempty"`
}

// ContainerSecurity is the part of a container's securityContext that
// users may set within the restricted level.
type ContainerSecurity struct {
	// RunAsUser of the container (not root).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsGroup of the container.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// SeccompProfile of the container.
	// +optional
	SeccompProfile *Profile `json:"seccompProfile,omitempty"`
	// AppArmorProfile of the container.
	// +optional
	AppArmorProfile *Profile `json:"appArmorProfile,omitempty"`
}

// ExtraContainerSecurity is the securityContext of a sidecar or init
// container: ContainerSecurity, a root filesystem that may be writable,
// and the one capability restricted allows to add.
type ExtraContainerSecurity struct {
	ContainerSecurity `json:",inline"`
	// ReadOnlyRootFilesystem (true when unset).
	// +optional
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem,omitempty"`
	// AddCapabilities: only NET_BIND_SERVICE (to listen below port 1024).
	// Every other capability is dropped.
	// +kubebuilder:validation:MaxItems=1
	// +kubebuilder:validation:items:Enum=NET_BIND_SERVICE
	// +listType=set
	// +optional
	AddCapabilities []corev1.Capability `json:"addCapabilities,omitempty"`
}

// ExtraContainer is a sidecar or init container of the instances' pods:
// an image with its command, plain or Secret-sourced environment, ports,
// resources and mounts of the spec's extraVolumes. It shares the pod's
// network (memcached's port 11211 included) but not the controller's
// TLS and auth files, and runs without privilege.
type ExtraContainer struct {
	// Name, distinct from memcached, exporter and the other extra
	// containers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['memcached', 'exporter']) && !self.startsWith('memcached-')",message="container names memcached, exporter and memcached-* are the controller's"
	Name string `json:"name"`

	// Image of the container.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Image string `json:"image"`

	// ImagePullPolicy (the spec's imagePullPolicy when unset).
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Command replaces the image's entrypoint.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args of the command.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env of the container: plain values, or one key of a Secret labelled
	// cache.runbook.dev/usable=true.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []ContainerEnvVar `json:"env,omitempty"`

	// Ports the container listens on (documentation for the Service-less
	// pod; 11211 and 9150 are memcached's and the exporter's).
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=containerPort
	// +listMapKey=protocol
	// +optional
	Ports []ContainerPort `json:"ports,omitempty"`

	// Resources of the container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// VolumeMounts of the spec's extraVolumes (by name).
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=mountPath
	// +optional
	VolumeMounts []ContainerVolumeMount `json:"volumeMounts,omitempty"`

	// SecurityContext of the container, within the restricted level.
	// +optional
	SecurityContext *ExtraContainerSecurity `json:"securityContext,omitempty"`
}

// ContainerEnvVar is a plain value or one key of a usable Secret.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.secretKeyRef))",message="an env var has either value or secretKeyRef"
type ContainerEnvVar struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Value string `json:"value,omitempty"`
	// SecretKeyRef reads one key of a Secret of the Memcached's namespace
	// that carries the label cache.runbook.dev/usable=true. A change of
	// its value reaches the pods when they next start.
	// +optional
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the Memcached's namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ContainerPort is a port a container listens on. There is no hostPort.
type ContainerPort struct {
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="self != 11211 && self != 9150",message="ports 11211 and 9150 are memcached's and the exporter's"
	ContainerPort int32 `json:"containerPort"`
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// ContainerVolumeMount mounts one of the spec's extraVolumes.
type ContainerVolumeMount struct {
	// Name of an entry of extraVolumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('memcached-')",message="volume names starting with memcached- are the controller's"
	Name string `json:"name"`
	// MountPath: absolute, not /etc/memcached or below.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(':') && !self.contains('..') && self != '/etc/memcached' && !self.startsWith('/etc/memcached/')",message="mountPath must be absolute, without ':' or '..', and not /etc/memcached or below (the controller's files)"
	MountPath string `json:"mountPath"`
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}
