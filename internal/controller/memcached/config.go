package memcached

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// settings is the fully defaulted, validated configuration of one Memcached:
// what the Deployment, Service and PodDisruptionBudget are built from. It is
// computed by resolveSettings and never read from the spec again, so every
// default lives in one place.
type settings struct {
	Size           int32
	Image          string
	MemoryMiB      int32
	MaxConnections int32
	Threads        int32
	MaxItemSizeKiB int32
	Verbosity      int32
	ExtraArgs      []string
	PDBEnabled     bool
	PDBMaxUnavail  intstr.IntOrString
	Exporter       bool
	ExporterImage  string
	// ServiceMonitor, its scrape interval and extra labels.
	ServiceMonitor         bool
	ServiceMonitorInterval string
	ServiceMonitorLabels   map[string]string
}

// managedFlag matches memcached flags that the controller sets itself (or
// that would break the pod: daemon mode, another user, another port). The CRD
// rejects them with the same expression; this check keeps objects that never
// went through the apiserver's validation (older CRD versions) safe too.
var managedFlag = regexp.MustCompile(`^(-[pUlmctIvdusPa]|--(port|udp-port|listen|memory-limit|conn-limit|threads|max-item-size|verbose|daemon|user|unix-socket|unix-mask|pidfile)(=|$))`)

// invalidSpecError is a spec the controller cannot run; it becomes the
// Degraded condition with reason InvalidSpec.
type invalidSpecError struct{ msg string }

func (e *invalidSpecError) Error() string { return e.msg }

// headroomMiB is the memory left to memcached's own overhead (connection
// buffers, hash table, thread stacks) when the item memory is derived from
// the container's memory limit: 10% of the limit, at least 16 MiB.
func headroomMiB(limitMiB int64) int64 {
	return max(limitMiB/10, 16)
}

// resolveSettings applies the defaults the CRD would apply (so objects built
// in Go behave like stored ones) and the defaults that depend on other fields
// (memory from the memory limit, PDB from the size), then validates the
// combinations memcached itself would refuse. On an invalid spec it returns
// what it resolved so far with the error: the size is then still known, for
// the status of the pods that keep running.
func resolveSettings(spec *cachev1alpha1.MemcachedSpec) (settings, error) {
	s := defaultSettings(spec)
	if err := checkRanges(s); err != nil {
		return s, err
	}
	if err := resolveMemory(&s, spec); err != nil {
		return s, err
	}
	if err := checkExtraArgs(s.ExtraArgs); err != nil {
		return s, err
	}
	resolvePDB(&s, spec.PodDisruptionBudget)
	resolveExporter(&s, spec.Exporter)
	return s, nil
}

// defaultSettings copies the spec's plain fields, each with the CRD's
// default when absent.
func defaultSettings(spec *cachev1alpha1.MemcachedSpec) settings {
	return settings{
		Size:           ptr.Deref(spec.Size, cachev1alpha1.DefaultSize),
		Image:          cmp.Or(spec.Image, cachev1alpha1.DefaultImage),
		MaxConnections: cmp.Or(spec.MaxConnections, cachev1alpha1.DefaultMaxConnections),
		Threads:        cmp.Or(spec.Threads, cachev1alpha1.DefaultThreads),
		MaxItemSizeKiB: cmp.Or(spec.MaxItemSizeKiB, cachev1alpha1.DefaultMaxItemSizeKiB),
		Verbosity:      spec.Verbosity,
		ExtraArgs:      spec.ExtraArgs,
		PDBMaxUnavail:  intstr.FromInt32(1),
	}
}

func checkRanges(s settings) error {
	if s.Size < 0 || s.Size > cachev1alpha1.MaxSize {
		return &invalidSpecError{fmt.Sprintf("size %d is outside 0..%d", s.Size, cachev1alpha1.MaxSize)}
	}
	if s.Verbosity < 0 || s.Verbosity > 3 {
		return &invalidSpecError{fmt.Sprintf("verbosity %d is outside 0..3", s.Verbosity)}
	}
	return nil
}

// resolveMemory sets the item memory: memoryMiB, else derived from the
// memory limit, else the default; and checks that memcached accepts it.
func resolveMemory(s *settings, spec *cachev1alpha1.MemcachedSpec) error {
	limit, hasLimit := spec.Resources.Limits[corev1.ResourceMemory]
	limitMiB := limit.Value() / (1 << 20)
	switch {
	case spec.MemoryMiB != nil:
		s.MemoryMiB = *spec.MemoryMiB
		if hasLimit && int64(s.MemoryMiB) > limitMiB {
			return &invalidSpecError{fmt.Sprintf("memoryMiB %d exceeds the memory limit of %d MiB", s.MemoryMiB, limitMiB)}
		}
	case hasLimit:
		if limitMiB < int64(cachev1alpha1.MinMemoryLimitMiB) {
			return &invalidSpecError{fmt.Sprintf("memory limit %s is below the minimum of %dMi", limit.String(), cachev1alpha1.MinMemoryLimitMiB)}
		}
		s.MemoryMiB = int32(limitMiB - headroomMiB(limitMiB))
	default:
		s.MemoryMiB = cachev1alpha1.DefaultMemoryMiB
	}
	if s.MemoryMiB < 1 {
		return &invalidSpecError{fmt.Sprintf("memoryMiB %d must be at least 1", s.MemoryMiB)}
	}
	if int64(s.MaxItemSizeKiB)*2 > int64(s.MemoryMiB)*1024 {
		return &invalidSpecError{fmt.Sprintf("maxItemSizeKiB %d is more than half of the item memory (%d MiB); memcached would refuse to start", s.MaxItemSizeKiB, s.MemoryMiB)}
	}
	return nil
}

func checkExtraArgs(args []string) error {
	for _, a := range args {
		if managedFlag.MatchString(a) {
			return &invalidSpecError{fmt.Sprintf("extraArgs sets %q, a flag the controller manages; use the matching spec field", a)}
		}
	}
	return nil
}

// resolvePDB: a PDB by default only above one instance, where
// maxUnavailable 1 protects something.
func resolvePDB(s *settings, pdb *cachev1alpha1.PodDisruptionBudgetSpec) {
	s.PDBEnabled = s.Size > 1
	if pdb != nil && pdb.Enabled != nil {
		s.PDBEnabled = *pdb.Enabled
	}
	if pdb != nil && pdb.MaxUnavailable != nil {
		s.PDBMaxUnavail = *pdb.MaxUnavailable
	}
}

func resolveExporter(s *settings, e *cachev1alpha1.ExporterSpec) {
	if e == nil || !e.Enabled {
		return
	}
	s.Exporter = true
	s.ExporterImage = cmp.Or(e.Image, cachev1alpha1.DefaultExporterImage)
	if sm := e.ServiceMonitor; sm != nil && sm.Enabled {
		s.ServiceMonitor = true
		s.ServiceMonitorInterval = sm.Interval
		s.ServiceMonitorLabels = sm.Labels
	}
}

// memcachedArgs is the memcached command line (without the binary) for s.
// The official image's entrypoint runs memcached when the first argument is
// a flag. UDP is off (-U 0): it is an amplification vector and no client
// library needs it.
func memcachedArgs(s settings) []string {
	args := []string{
		"-p", strconv.Itoa(int(cachev1alpha1.MemcachedPort)),
		"-U", "0",
		"-m", strconv.Itoa(int(s.MemoryMiB)),
		"-c", strconv.Itoa(int(s.MaxConnections)),
		"-t", strconv.Itoa(int(s.Threads)),
		"-I", strconv.Itoa(int(s.MaxItemSizeKiB)) + "k",
	}
	if s.Verbosity > 0 {
		args = append(args, "-"+strings.Repeat("v", int(s.Verbosity)))
	}
	return append(args, s.ExtraArgs...)
}

// configHash identifies everything that requires new pods when it changes:
// the memcached command line, the images and the exporter. It is written to
// the pod template's annotations, so a change rolls the instances one at a
// time (maxSurge 0, maxUnavailable 1) and is visible on every pod.
func configHash(s settings) string {
	h := sha256.New()
	// Encoding a struct of strings and slices of strings cannot fail.
	b, _ := json.Marshal(struct {
		Image         string   `json:"image"`
		Args          []string `json:"args"`
		Exporter      bool     `json:"exporter"`
		ExporterImage string   `json:"exporterImage"`
	}{s.Image, memcachedArgs(s), s.Exporter, s.ExporterImage})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
