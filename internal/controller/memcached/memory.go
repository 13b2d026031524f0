package memcached

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// headroomMiB is the memory a container with a memory limit of limitMiB
// keeps for memcached's own overhead (connection buffers, hash table,
// thread stacks) besides the item memory: 10% of the limit, at least
// 16 MiB. Item memory derived from a limit leaves exactly this; an explicit
// memoryMiB must leave at least this.
func headroomMiB(limitMiB int64) int64 {
	return max(limitMiB/10, 16)
}

// resolveMemory sets the item memory: memoryMiB, else derived from the
// memory limit, else the default; without a limit it also sets the
// default limit. It checks what memcached and the container need.
func resolveMemory(s *settings, spec *cachev1alpha1.MemcachedSpec) error {
	limit, hasLimit := spec.Resources.Limits[corev1.ResourceMemory]
	var err error
	switch {
	case !hasLimit:
		s.MemoryMiB = ptr.Deref(spec.MemoryMiB, cachev1alpha1.DefaultMemoryMiB)
		s.DefaultMemoryLimit = defaultMemoryLimit(s.MemoryMiB, spec.Resources.Requests[corev1.ResourceMemory])
	case spec.MemoryMiB != nil:
		s.MemoryMiB = *spec.MemoryMiB
		err = checkHeadroom(s.MemoryMiB, limit.Value()>>20)
	default:
		s.MemoryMiB, err = memoryFromLimit(limit)
	}
	if err != nil {
		return err
	}
	if s.MemoryMiB < 1 {
		return &invalidSpecError{Msg: fmt.Sprintf("memoryMiB %d must be at least 1", s.MemoryMiB)}
	}
	if int64(s.MaxItemSizeKiB)*2 > int64(s.MemoryMiB)*1024 {
		return &invalidSpecError{Msg: fmt.Sprintf("maxItemSizeKiB %d is more than half of the item memory (%d MiB); memcached would refuse to start", s.MaxItemSizeKiB, s.MemoryMiB)}
	}
	return nil
}

// memoryFromLimit is the item memory of a container limited to limit.
func memoryFromLimit(limit resource.Quantity) (int32, error) {
	limitMiB := limit.Value() >> 20
	if limitMiB < int64(cachev1alpha1.MinMemoryLimitMiB) {
		return 0, &invalidSpecError{Msg: fmt.Sprintf("memory limit %s is below the minimum of %dMi", limit.String(), cachev1alpha1.MinMemoryLimitMiB)}
	}
	return int32(limitMiB - headroomMiB(limitMiB)), nil
}

// checkHeadroom refuses an item memory that leaves the container too little
// for memcached's own memory: it would be killed for using what it was
// told it may use.
func checkHeadroom(memoryMiB int32, limitMiB int64) error {
	m := int64(memoryMiB)
	if m > limitMiB {
		return &invalidSpecError{Msg: fmt.Sprintf("memoryMiB %d exceeds the memory limit of %d MiB", m, limitMiB)}
	}
	if need := headroomMiB(limitMiB); m+need > limitMiB {
		return &invalidSpecError{Msg: fmt.Sprintf(
			"memoryMiB %d leaves %d MiB of the %d MiB memory limit for memcached's own memory (connections, hash table, threads), which needs %d MiB (10%% of the limit, at least 16 MiB): set memoryMiB to at most %d, or raise the limit",
			m, limitMiB-m, limitMiB, need, limitMiB-need)}
	}
	return nil
}

// defaultMemoryLimit is the memory limit of a container whose spec sets
// none: the smallest limit that leaves memoryMiB its headroom (64 MiB →
// 80Mi, 1024 MiB → 1137Mi), or the memory request when that is larger (a
// limit below the request is invalid).
func defaultMemoryLimit(memoryMiB int32, request resource.Quantity) *resource.Quantity {
	m := int64(memoryMiB)
	l := max(m+16, m*10/9)
	for m+headroomMiB(l) > l {
		l++
	}
	q := resource.NewQuantity(l<<20, resource.BinarySI)
	if request.Cmp(*q) > 0 {
		r := request.DeepCopy()
		return &r
	}
	return q
}
