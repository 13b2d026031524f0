package memcached

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// settings is the fully defaulted, validated configuration of one Memcached:
// what the workload, Service, PodDisruptionBudget and NetworkPolicy are
// built from. It is computed by resolveSettings (and SecretHash from the
// Secrets' data) and never read from the spec again, so every default
// lives in one place. The pod overrides and placement are read from the
// spec by the functions that render them, after resolveSettings checked
// them.
type settings struct {
	Kind           cachev1alpha1.WorkloadKind
	Size           int32
	Image          string
	MemoryMiB      int32
	MaxConnections int32
	Threads        int32
	MaxItemSizeKiB int32
	Verbosity      int32
	ExtraArgs      []string
	// DefaultMemoryLimit is the memory limit the controller gives the
	// memcached container because the spec sets none; nil when it does.
	DefaultMemoryLimit *resource.Quantity
	PDBEnabled         bool
	PDBMaxUnavail      intstr.IntOrString
	Exporter           bool
	ExporterImage      string
	// ServiceMonitor, its scrape interval and extra labels.
	ServiceMonitor         bool
	ServiceMonitorInterval string
	ServiceMonitorLabels   map[string]string
	// TLS and Auth are nil when off.
	TLS  *tlsSettings
	Auth *authSettings
	// NetworkPolicy is nil when disabled.
	NetworkPolicy *networkPolicySettings
	// WarmRestart keeps the items across container restarts
	// (warmrestart.go).
	WarmRestart bool
	// TLSAgentImage is the image of the TLS agent beside memcached (the
	// manager's flag; used when TLS is on).
	TLSAgentImage string
	// SecretHash is the keyed fingerprint of the TLS and auth Secrets' data
	// (empty without them); a change rolls the pods.
	SecretHash string
}

// invalidSpecError is a spec the controller cannot run; it becomes the
// Degraded condition with reason InvalidSpec. The kit's type under a short
// name: the spec checks build one in many places.
type invalidSpecError = status.InvalidSpecError

// resolveSettings applies the defaults the CRD would apply (so objects built
// in Go behave like stored ones) and the defaults that depend on other fields
// (memory from the memory limit, PDB from the size), then validates the
// combinations memcached itself would refuse and what the CRD cannot check
// (extraArgs as memcached parses them, label syntax, selectors). On an
// invalid spec it returns what it resolved so far with the error: the size
// is then still known, for the status of the pods that keep running.
func resolveSettings(spec *cachev1alpha1.MemcachedSpec) (settings, error) {
	s := defaultSettings(spec)
	resolvePDB(&s, spec.PodDisruptionBudget)
	resolveExporter(&s, spec.Exporter)
	resolveSecurity(&s, spec)
	for _, check := range []func() error{
		func() error { return checkRanges(s) },
		func() error { return resolveMemory(&s, spec) },
		func() error { return checkSecurity(s) },
		func() error { return checkExtraArgs(s.ExtraArgs, argsOf(s)) },
		func() error { return checkWarmRestart(s, spec) },
		func() error { return checkPodOverrides(&spec.PodOverrides) },
		func() error { return checkSecurityOverrides(&spec.PodOverrides) },
		func() error { return resolveNetworkPolicy(&s, spec.NetworkPolicy) },
	} {
		if err := check(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// argsOf is what the rest of the spec means for extraArgs.
func argsOf(s settings) argsContext {
	return argsContext{auth: s.Auth != nil, warmRestart: s.WarmRestart}
}

// defaultSettings copies the spec's plain fields, each with the CRD's
// default when absent.
func defaultSettings(spec *cachev1alpha1.MemcachedSpec) settings {
	return settings{
		Kind:           cmp.Or(spec.WorkloadKind, cachev1alpha1.WorkloadDeployment),
		Size:           ptr.Deref(spec.Size, cachev1alpha1.DefaultSize),
		Image:          cmp.Or(spec.Image, cachev1alpha1.DefaultImage),
		MaxConnections: cmp.Or(spec.MaxConnections, cachev1alpha1.DefaultMaxConnections),
		Threads:        cmp.Or(spec.Threads, cachev1alpha1.DefaultThreads),
		MaxItemSizeKiB: cmp.Or(spec.MaxItemSizeKiB, cachev1alpha1.DefaultMaxItemSizeKiB),
		Verbosity:      spec.Verbosity,
		ExtraArgs:      spec.ExtraArgs,
		PDBMaxUnavail:  intstr.FromInt32(1),
		WarmRestart:    spec.WarmRestart,
	}
}

func checkRanges(s settings) error {
	if s.Size < 0 || s.Size > cachev1alpha1.MaxSize {
		return &invalidSpecError{Msg: fmt.Sprintf("size %d is outside 0..%d", s.Size, cachev1alpha1.MaxSize)}
	}
	if s.Verbosity < 0 || s.Verbosity > 3 {
		return &invalidSpecError{Msg: fmt.Sprintf("verbosity %d is outside 0..3", s.Verbosity)}
	}
	if s.Kind != cachev1alpha1.WorkloadDeployment && s.Kind != cachev1alpha1.WorkloadStatefulSet {
		return &invalidSpecError{Msg: fmt.Sprintf("workloadKind %q is neither Deployment nor StatefulSet", s.Kind)}
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
// library needs it. TLS and auth come before extraArgs, which the
// controller has checked cannot override any of it.
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
	args = append(args, tlsArgs(s.TLS)...)
	args = append(args, authArgs(s.Auth)...)
	args = append(args, warmRestartArgs(s)...)
	return append(args, s.ExtraArgs...)
}

// configHash identifies everything that requires new pods when it changes:
// the memcached command line, the images, the exporter and the pod
// overrides. It is written to the pod template's annotations, so a change
// rolls the instances one at a time (maxSurge 0, maxUnavailable 1) and is
// visible on every pod. Settings added after the first release enter the
// hash only when set, so an upgrade of the controller leaves the hash of an
// unchanged spec alone. The Secrets' data has its own annotation
// (AnnotationSecretHash).
func configHash(s settings, overrides *cachev1alpha1.PodOverrides) string {
	h := sha256.New()
	// Encoding a struct of strings, slices and maps cannot fail.
	b, _ := json.Marshal(struct {
		Image         string                      `json:"image"`
		Args          []string                    `json:"args"`
		Exporter      bool                        `json:"exporter"`
		ExporterImage string                      `json:"exporterImage"`
		ExporterArgs  []string                    `json:"exporterArgs,omitempty"`
		MemoryLimit   string                      `json:"memoryLimit,omitempty"`
		Overrides     *cachev1alpha1.PodOverrides `json:"overrides,omitempty"`
		TLSAgent      []string                    `json:"tlsAgent,omitempty"`
	}{s.Image, memcachedArgs(s), s.Exporter, s.ExporterImage, exporterTLSArgs(s.TLS, s.Exporter),
		defaultLimitString(s.DefaultMemoryLimit), nonEmptyOverrides(overrides), tlsAgentHashInput(s)})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func defaultLimitString(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

// nonEmptyOverrides is o, or nil when it sets nothing.
func nonEmptyOverrides(o *cachev1alpha1.PodOverrides) *cachev1alpha1.PodOverrides {
	if o == nil {
		return nil
	}
	b, _ := json.Marshal(o)
	if string(b) == "{}" {
		return nil
	}
	return o
}
