package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodOverrides are the settings of the instances' pods that users of other
// memcached charts expect. Each is bounded; none can change the labels the
// controller selects its pods by, mount a Secret or ConfigMap, or reach the
// API with a token.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podLabels) || !self.podLabels.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/component'])",message="podLabels must not set app.kubernetes.io/name, instance, managed-by or component: the controller selects its pods by them"
// +kubebuilder:validation:XValidation:rule="!has(self.podAnnotations) || !self.podAnnotations.exists(k, k.startsWith('cache.runbook.dev/'))",message="podAnnotations must not set cache.runbook.dev/ annotations: the controller sets them"
// +kubebuilder:validation:XValidation:rule="!has(self.sidecars) || !has(self.initContainers) || !self.sidecars.exists(s, self.initContainers.exists(i, i.name == s.name))",message="sidecars and initContainers must have distinct names"
// +kubebuilder:validation:XValidation:rule="!has(self.sidecars) || self.sidecars.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.extraVolumes) && self.extraVolumes.exists(v, v.name == m.name)))",message="sidecars may mount only the spec's extraVolumes"
// +kubebuilder:validation:XValidation:rule="!has(self.initContainers) || self.initContainers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.extraVolumes) && self.extraVolumes.exists(v, v.name == m.name)))",message="initContainers may mount only the spec's extraVolumes"
type PodOverrides struct {
	// ImagePullSecrets for both containers. Each Secret must carry the
	// label cache.runbook.dev/usable=true.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	ImagePullSecrets []LocalSecretReference `json:"imagePullSecrets,omitempty"`

	// PodLabels are added to the instances' pods (not to the selector).
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to the instances' pods.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// ServiceAccountName the pods run as. Its token is still not mounted
	// (automountServiceAccountToken stays false).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// TerminationGracePeriodSeconds of the pods (Kubernetes' default, 30,
	// when unset).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PreStopDelaySeconds keeps a stopping instance serving this long
	// (a preStop sleep) after it has left the Service's endpoints, so that
	// clients drop it from their server lists before it goes. It must be
	// shorter than the termination grace period.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	PreStopDelaySeconds int32 `json:"preStopDelaySeconds,omitempty"`

	// ExtraEnv are environment variables of the memcached container, plain
	// values only.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	ExtraEnv []EnvVar `json:"extraEnv,omitempty"`

	// ExtraVolumes are mounted into the memcached container, e.g. for
	// extstore (-o ext_path=/data/extstore:1G with a volume at /data):
	// scratch space only (emptyDir or a generic ephemeral volume).
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(v, self.exists_one(w, w.mountPath == v.mountPath))",message="extraVolumes must have distinct mountPaths"
	// +optional
	ExtraVolumes []ExtraVolume `json:"extraVolumes,omitempty"`

	// PodSecurityContext overrides the pod's securityContext within the
	// Pod Security restricted level.
	// +optional
	PodSecurityContext *PodSecurity `json:"podSecurityContext,omitempty"`

	// ContainerSecurityContext overrides the memcached container's
	// securityContext within the restricted level; its root filesystem
	// stays read-only.
	// +optional
	ContainerSecurityContext *ContainerSecurity `json:"containerSecurityContext,omitempty"`

	// InitContainers run, in order, before the sidecars and memcached start.
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=name
	// +optional
	InitContainers []ExtraContainer `json:"initContainers,omitempty"`

	// Sidecars run next to memcached for the life of the pod, as native
	// sidecars (init containers with restartPolicy Always): they start
	// before memcached and stop after it, so a log shipper or proxy sees
	// memcached's whole life.
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=name
	// +optional
	Sidecars []ExtraContainer `json:"sidecars,omitempty"`
}

// LocalSecretReference names a Secret in the Memcached's namespace.
type LocalSecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// EnvVar is an environment variable with a plain value: no valueFrom, so
// no Secret or ConfigMap can be read through it.
type EnvVar struct {
	// Name of the variable. Variables that memcached, OpenSSL, SASL, glibc's
	// getopt or the dynamic loader read are refused: they would change the
	// managed configuration (TLS, the command line) behind the spec's back.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="!['MEMCACHED_', 'T_MEMD_', 'SASL_', 'OPENSSL_', 'SSL_', 'LD_'].exists(p, self.upperAscii().startsWith(p)) && self.upperAscii() != 'POSIXLY_CORRECT'",message="extraEnv must not set variables memcached, OpenSSL, SASL, getopt or the dynamic loader read (MEMCACHED_*, T_MEMD_*, SASL_*, OPENSSL_*, SSL_*, LD_*, POSIXLY_CORRECT)"
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Value string `json:"value,omitempty"`
}

// ExtraVolume is scratch space for the memcached container: exactly one of
// emptyDir and ephemeral.
// +kubebuilder:validation:XValidation:rule="has(self.emptyDir) != has(self.ephemeral)",message="an extra volume needs exactly one of emptyDir and ephemeral"
type ExtraVolume struct {
	// Name of the volume; names starting with "memcached-" are the
	// controller's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('memcached-')",message="volume names starting with memcached- are the controller's"
	Name string `json:"name"`

	// MountPath in the memcached container: absolute, not under
	// /etc/memcached (the controller's TLS and auth files).
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(':') && !self.contains('..') && self != '/etc/memcached' && !self.startsWith('/etc/memcached/')",message="mountPath must be absolute, without ':' or '..', and not /etc/memcached or below (the controller's files)"
	MountPath string `json:"mountPath"`

	// EmptyDir: a directory on the node (or in memory, which counts against
	// the container's memory limit) that lives as long as the pod.
	// +optional
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`

	// Ephemeral: a new PersistentVolumeClaim per pod, deleted with it.
	// +optional
	Ephemeral *EphemeralVolume `json:"ephemeral,omitempty"`
}

// EmptyDirVolume is an emptyDir volume.
type EmptyDirVolume struct {
	// Medium: "" (the node's disk) or Memory (tmpfs).
	// +kubebuilder:validation:Enum="";Memory
	// +optional
	Medium corev1.StorageMedium `json:"medium,omitempty"`
	// SizeLimit of the volume.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// EphemeralVolume is a generic ephemeral volume: a PersistentVolumeClaim
// of size from storageClassName, created with the pod and deleted with it.
// It never starts from an existing volume's data.
type EphemeralVolume struct {
	// StorageClassName of the claim (the cluster's default when unset).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// Size of the claim.
	Size resource.Quantity `json:"size"`
}
