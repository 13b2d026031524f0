// Package probe is the probe runtime of RebootPolicy triggers: the
// probers (httpGet, tcpSocket, grpc, exec, sql, watch, referenced), their
// HTTP transports, the reference watch and the Secret consent they read
// through. It knows nothing of the controller: the controller hands it a
// Spec and reads Observations back.
package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// Trigger types as used in metric labels.
const (
	TypeHTTP  = "httpGet"
	TypeTCP   = "tcpSocket"
	TypeGRPC  = "grpc"
	TypeExec  = "exec"
	TypeSQL   = "sql"
	TypeWatch = "watch"
)

// Prober runs one check of a policy's trigger.
type Prober interface {
	Kind() string
	Probe(ctx context.Context) Observation
	Close()
}

// WakeableProber may also be woken between periods (something it watches
// changed); probeWoken then reads only what changed and polls nothing.
type WakeableProber interface {
	Prober
	Wakeups() <-chan struct{}
	ProbeWoken(ctx context.Context) Observation
}

// DeadlineProber bounds a probe by a timeout itself, without a context
// of its own per probe (the worker's ctx is the same for every probe,
// and its end ends the probe's requests at once). It reports the probe
// through report exactly once before it returns, but may report earlier
// than it returns, and from another goroutine: a probe that timed out is
// reported at its deadline while it still waits out what it holds.
type DeadlineProber interface {
	Prober
	ProbeWithin(ctx context.Context, timeout time.Duration, report func(Observation))
}

// Factory builds probers.
type Factory interface {
	NewProber(s Spec) (Prober, error)
}

// Spec is what a prober is built from: one policy of a RebootPolicy.
type Spec struct {
	// Policy is the RebootPolicy, Name the policy's name in it.
	Policy types.NamespacedName
	Name   string
	// Trigger is the policy's trigger.
	Trigger autorebootv1alpha1.Trigger
	// Target is the RebootPolicy's target (referenced triggers read its
	// templates).
	Target autorebootv1alpha1.TargetRef
}

// Workloads is how referenced triggers read target workloads, whose
// shapes the controller knows.
type Workloads interface {
	// NewObject and NewList are an empty object and list of kind; nil
	// for a kind that is no target.
	NewObject(kind autorebootv1alpha1.TargetKind) client.Object
	NewList(kind autorebootv1alpha1.TargetKind) client.ObjectList
	// PodSpec is the pod template's spec of a target.
	PodSpec(obj client.Object) *corev1.PodSpec
	// TemplateVersion changes whenever PodSpec may (the generation, and
	// that of a workload the target takes its template from).
	TemplateVersion(obj client.Object) string
}

// Settings are the manager-wide probe settings (flags in main).
type Settings struct {
	// ExecProbeDir enables exec probes for scripts inside this directory;
	// empty disables exec probes.
	ExecProbeDir string
	// ExecOutputLimit caps the bytes of exec output kept (default 4 KiB).
	ExecOutputLimit int
	// OperatorNamespace is the manager's own namespace, where the
	// fingerprint key Secret lives.
	OperatorNamespace string
	// FingerprintKeySecret names that Secret (default runbook-fingerprint-key).
	FingerprintKeySecret string
	// SQL bounds the sql triggers' queries and results.
	SQL SQLSettings
	// Referenced bounds referenced triggers and says which Secrets they use.
	Referenced ReferencedSettings
}

// SQLSettings are the admin's bounds on sql triggers.
type SQLSettings struct {
	Limits sqlguard.Limits
	// AllowUnixSockets lists the database sockets DSNs may name; they must
	// also be allowed by the network policy.
	AllowUnixSockets []string
	// AllowPowerful accepts DSNs whose user may act outside the database's
	// own data (sqlguard.Options.AllowPowerfulUser).
	AllowPowerful bool
}

// Probers is the production Factory; its fields are the manager-wide
// settings.
type Probers struct {
	settings Settings
	// reader reads Secrets and watched objects live from the apiserver
	// (no cluster-wide cache of Secrets).
	reader client.Reader
	keys   *fingerprint.Source
	clock  clock.Clock
	// network decides where probes and database connections may go.
	network *egress.Policy
	http    *httpTransports
	// targets reads target workloads from the manager's cache (referenced
	// triggers); watcher and refReader tell and read what they reference.
	targets   client.Reader
	watcher   *RefWatcher
	refReader *refReader
	workloads Workloads
}

// NewProbers builds the probers; referenced triggers need WithReferences.
func NewProbers(settings Settings, reader client.Reader, keys *fingerprint.Source, network *egress.Policy, clk clock.Clock) *Probers {
	if settings.ExecOutputLimit <= 0 {
		settings.ExecOutputLimit = 4096
	}
	return &Probers{
		settings:  settings,
		reader:    reader,
		keys:      keys,
		clock:     clk,
		network:   network,
		http:      newHTTPTransports(network),
		targets:   reader,
		watcher:   newRefIndex(),
		refReader: newRefReader(reader),
	}
}

// WithReferences sets where referenced triggers read targets (the
// manager's cache), how they read their templates, and how they learn of
// changes.
func (f *Probers) WithReferences(targets client.Reader, watcher *RefWatcher, workloads Workloads) *Probers {
	f.targets, f.watcher, f.workloads = targets, watcher, workloads
	return f
}

func (f *Probers) NewProber(s Spec) (Prober, error) {
	t := s.Trigger
	ns := s.Policy.Namespace
	if err := ValidateTrigger(t); err != nil {
		return nil, err
	}
	switch {
	case t.Probe != nil && t.Probe.HTTPGet != nil:
		return newHTTPProber(f.http, ns, t)
	case t.Probe != nil && t.Probe.TCPSocket != nil:
		return newTCPProber(f.network, ns, t)
	case t.Probe != nil && t.Probe.GRPC != nil:
		return newGRPCProber(f.network, ns, t), nil
	case t.Probe != nil && t.Probe.Exec != nil:
		return newExecProber(f.settings, t.Probe.Exec.Command), nil
	case t.SQL != nil:
		return newSQLProber(f, ns, *t.SQL), nil
	case t.Watch != nil:
		return newWatchProber(f.reader, f.keys, ns, *t.Watch), nil
	case t.Referenced != nil:
		return newReferencedProber(f, s), nil
	}
	return nil, fmt.Errorf("policy %s: trigger has no probe, sql, watch or referenced", s.Name)
}

// TriggerType is the metric label of a trigger.
func TriggerType(t autorebootv1alpha1.Trigger) string {
	switch {
	case t.Probe != nil && t.Probe.HTTPGet != nil:
		return TypeHTTP
	case t.Probe != nil && t.Probe.TCPSocket != nil:
		return TypeTCP
	case t.Probe != nil && t.Probe.GRPC != nil:
		return TypeGRPC
	case t.Probe != nil && t.Probe.Exec != nil:
		return TypeExec
	case t.SQL != nil:
		return TypeSQL
	case t.Watch != nil:
		return TypeWatch
	case t.Referenced != nil:
		return TypeReferenced
	}
	return "unknown"
}

// networkObservation turns a connection error into an observation a
// tenant may see. A refusal by the network policy is an Error (the probe
// is misconfigured, nothing to restart for); any other failure is a
// Failure with one of three fixed phrases: which of refused, filtered,
// reset or unreachable it was would make the probe a port scanner.
func networkObservation(ctx context.Context, err error, what string) Observation {
	var denied *egress.DeniedError
	if errors.As(err, &denied) {
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonAddressNotAllowed,
			Message: what + ": " + denied.Error()}
	}
	if ctx.Err() != nil || isTimeout(err) {
		return Observation{Result: autorebootv1alpha1.ResultFailure, Message: what + ": timed out"}
	}
	if isDialError(err) {
		return Observation{Result: autorebootv1alpha1.ResultFailure, Message: what + ": " + egress.ErrConnectionFailed.Error()}
	}
	return Observation{Result: autorebootv1alpha1.ResultFailure, Message: what + ": request failed"}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isDialError(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op == "dial"
	}
	var de *net.DNSError
	return errors.As(err, &de)
}
