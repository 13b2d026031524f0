package memcached

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Warm restarts: memcached keeps its items in a file (-e) on a
// memory-backed emptyDir that outlives the container, and saves the file's
// metadata when it is stopped with SIGUSR1. The pages of the file are the
// item memory itself (memcached maps the file instead of allocating), so
// the container's memory limit needs no more than without warmRestart:
// memoryMiB plus the headroom (docs/memcached.md shows the measurement).

// warmFileSlackMiB is what the volume holds beside the memory file: the
// metadata file memcached writes on a graceful stop (a few hundred bytes).
const warmFileSlackMiB = 1

// warmRestartArgs point memcached at its memory file.
func warmRestartArgs(s settings) []string {
	if !s.WarmRestart {
		return nil
	}
	return []string{"-e", cachev1alpha1.WarmRestartMemoryFile}
}

// warmRestartVolume is the memory-backed emptyDir of the memory file, sized
// to the item memory: a pod's tmpfs is charged to its memory, and a file
// larger than memoryMiB is never written.
func warmRestartVolume(s settings) *corev1ac.VolumeApplyConfiguration {
	size := resource.NewQuantity(int64(s.MemoryMiB+warmFileSlackMiB)<<20, resource.BinarySI)
	return corev1ac.Volume().WithName(cachev1alpha1.WarmRestartVolume).
		WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithMedium(corev1.StorageMediumMemory).WithSizeLimit(*size))
}

// withWarmRestart mounts the volume into the memcached container and asks
// the kubelet to stop it with SIGUSR1 (lifecycle.stopSignal, which keeps
// any preStop the overrides set). The image has no shell, so no preStop
// can send the signal; stopSignal needs no privilege and no shared process
// namespace. Where the ContainerStopSignals feature is off the apiserver
// drops the field and the runtime sends the image's STOPSIGNAL.
func withWarmRestart(c *corev1ac.ContainerApplyConfiguration, s settings) {
	if !s.WarmRestart {
		return
	}
	c.WithVolumeMounts(corev1ac.VolumeMount().WithName(cachev1alpha1.WarmRestartVolume).
		WithMountPath(cachev1alpha1.WarmRestartMountPath))
	if c.Lifecycle == nil {
		c.WithLifecycle(corev1ac.Lifecycle())
	}
	c.Lifecycle.WithStopSignal(cachev1alpha1.WarmRestartStopSignal)
}

// withWarmRestartPod names the pod's OS, which a container's stopSignal
// requires.
func withWarmRestartPod(pod *corev1ac.PodSpecApplyConfiguration, s settings) {
	if s.WarmRestart {
		pod.WithOS(corev1ac.PodOS().WithName(corev1.Linux))
	}
}

// checkWarmRestart refuses what would break the memory file: too little
// item memory for memcached to start on it, an extra volume mounted over
// it. (extraArgs -e is refused by checkExtraArgs.)
func checkWarmRestart(s settings, spec *cachev1alpha1.MemcachedSpec) error {
	if !s.WarmRestart {
		return nil
	}
	if s.MemoryMiB < cachev1alpha1.MinWarmRestartMemoryMiB {
		return &invalidSpecError{Msg: fmt.Sprintf("warmRestart needs an item memory of at least %d MiB, not %d: memcached preallocates a 1 MiB page per slab class on its memory file and refuses to start with less", cachev1alpha1.MinWarmRestartMemoryMiB, s.MemoryMiB)}
	}
	dir := cachev1alpha1.WarmRestartMountPath
	for _, v := range spec.ExtraVolumes {
		p := strings.TrimRight(v.MountPath, "/")
		if p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, p+"/") {
			return &invalidSpecError{Msg: fmt.Sprintf("extra volume %s mounts at %s, over the warm-restart memory file in %s", v.Name, v.MountPath, dir)}
		}
	}
	return nil
}
