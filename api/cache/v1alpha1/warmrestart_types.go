package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Warm restarts (spec.warmRestart): memcached keeps its item memory in a
// file on a memory-backed emptyDir (memcached -e) and, stopped with
// SIGUSR1, saves the file's metadata beside it, so the next memcached of
// the same pod starts with the items. The volume lives as long as the pod:
// a container restart keeps the items, a new pod starts empty.
const (
	// WarmRestartVolume is the name of the memory-backed emptyDir.
	WarmRestartVolume = "memcached-warm-restart"
	// WarmRestartMountPath is where the memcached container mounts it;
	// extraVolumes may not mount anything there.
	WarmRestartMountPath = "/var/lib/memcached-warm"
	// WarmRestartMemoryFile is memcached's memory file (-e).
	WarmRestartMemoryFile = WarmRestartMountPath + "/memory"
	// WarmRestartStopSignal makes memcached save its memory file and exit.
	WarmRestartStopSignal = "SIGUSR1"
	// MinWarmRestartMemoryMiB is the least item memory memcached starts
	// with on a memory file: it preallocates a 1 MiB slab page for each
	// slab class, 39 of them with the default growth factor (memcached
	// 1.6.18: "max memory must be at least 39 megabytes").
	MinWarmRestartMemoryMiB int32 = 39
)

// RestartOutcome says whether a restarted memcached kept its items.
// +kubebuilder:validation:Enum=Warm;Cold
type RestartOutcome string

const (
	// RestartWarm: the previous memcached stopped cleanly (on its stop
	// signal) and the next one started later than the second it stopped
	// in, so it loaded the saved items.
	RestartWarm RestartOutcome = "Warm"
	// RestartCold: the previous memcached was killed (SIGKILL, OOM, a
	// crash) or the next one started within the same second; it starts
	// empty.
	RestartCold RestartOutcome = "Cold"
)

// Reasons of RestartStatus.
const (
	// ReasonStoppedCleanly (Warm): memcached exited 0 after its stop signal.
	ReasonStoppedCleanly = "StoppedCleanly"
	// ReasonKilled (Cold): memcached exited on a signal it cannot handle
	// (SIGKILL: the grace period ran out, or a kill from outside).
	ReasonKilled = "Killed"
	// ReasonOOMKilled (Cold): the kernel killed memcached for its memory.
	ReasonOOMKilled = "OOMKilled"
	// ReasonFailed (Cold): memcached exited with an error.
	ReasonFailed = "Failed"
	// ReasonRestartedTooSoon (Cold): the next memcached started in the
	// second the previous one stopped in; memcached refuses a memory file
	// whose stop time is not in the past.
	ReasonRestartedTooSoon = "RestartedTooSoon"
)

// Event reasons of warm restarts.
const (
	// EventWarmRestart (Normal): a memcached container restarted with its
	// items.
	EventWarmRestart = "WarmRestart"
	// EventColdRestart (Warning): a memcached container of a Memcached
	// with warmRestart restarted without its items.
	EventColdRestart = "ColdRestart"
)

// RestartStatus is one restart of a memcached container.
type RestartStatus struct {
	// Pod is the pod whose memcached container restarted.
	Pod string `json:"pod"`
	// StoppedAt is when the previous memcached stopped.
	StoppedAt metav1.Time `json:"stoppedAt"`
	// StartedAt is when the next memcached started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// Outcome is Warm when the items were kept, else Cold.
	Outcome RestartOutcome `json:"outcome"`
	// Reason is a CamelCase word for the outcome (StoppedCleanly, Killed,
	// OOMKilled, Failed, RestartedTooSoon, StopSignalNotSIGUSR1).
	Reason string `json:"reason"`
	// Message says how the previous memcached ended.
	// +optional
	Message string `json:"message,omitempty"`
}

// ReasonStopSignal (Cold): the kubelet reports that the container's stop
// signal is not SIGUSR1, so memcached exited without saving.
const ReasonStopSignal = "StopSignalNotSIGUSR1"
