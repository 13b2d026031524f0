package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// Trigger types as used in metric labels.
const (
	typeHTTP  = "httpGet"
	typeTCP   = "tcpSocket"
	typeGRPC  = "grpc"
	typeExec  = "exec"
	typeSQL   = "sql"
	typeWatch = "watch"
)

// prober runs one check of a policy's trigger.
type prober interface {
	kind() string
	probe(ctx context.Context) observation
	close()
}

// wakeableProber may also be woken between periods (something it watches
// changed); probeWoken then reads only what changed and polls nothing.
type wakeableProber interface {
	prober
	wakeups() <-chan struct{}
	probeWoken(ctx context.Context) observation
}

// deadlineProber bounds a probe by a timeout itself, without a context
// of its own per probe (the worker's ctx is the same for every probe,
// and its end ends the probe's requests at once).
type deadlineProber interface {
	prober
	probeWithin(ctx context.Context, timeout time.Duration) observation
}

// proberFactory builds probers; its fields are the manager-wide settings.
type proberFactory interface {
	newProber(s workerSpec) (prober, error)
}

// ProbeSettings are the manager-wide probe settings (flags in main).
type ProbeSettings struct {
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

// probers is the production proberFactory.
type probers struct {
	settings ProbeSettings
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
	watcher   *refWatcher
	refReader *refReader
}

func newProbers(settings ProbeSettings, reader client.Reader, keys *fingerprint.Source, network *egress.Policy, clk clock.Clock) *probers {
	if settings.ExecOutputLimit <= 0 {
		settings.ExecOutputLimit = 4096
	}
	return &probers{
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

// withReferences sets where referenced triggers read targets (the
// manager's cache) and learn of changes.
func (f *probers) withReferences(targets client.Reader, watcher *refWatcher) *probers {
	f.targets, f.watcher = targets, watcher
	return f
}

func (f *probers) newProber(s workerSpec) (prober, error) {
	t := s.Trigger
	ns := s.Key.Object.Namespace
	if err := validateTrigger(t); err != nil {
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
	return nil, fmt.Errorf("policy %s: trigger has no probe, sql, watch or referenced", s.Key.Policy)
}

// triggerType is the metric label of a trigger.
func triggerType(t autorebootv1alpha1.Trigger) string {
	switch {
	case t.Probe != nil && t.Probe.HTTPGet != nil:
		return typeHTTP
	case t.Probe != nil && t.Probe.TCPSocket != nil:
		return typeTCP
	case t.Probe != nil && t.Probe.GRPC != nil:
		return typeGRPC
	case t.Probe != nil && t.Probe.Exec != nil:
		return typeExec
	case t.SQL != nil:
		return typeSQL
	case t.Watch != nil:
		return typeWatch
	case t.Referenced != nil:
		return typeReferenced
	}
	return "unknown"
}

// networkObservation turns a connection error into an observation a
// tenant may see. A refusal by the network policy is an Error (the probe
// is misconfigured, nothing to restart for); any other failure is a
// Failure with one of three fixed phrases: which of refused, filtered,
// reset or unreachable it was would make the probe a port scanner.
func networkObservation(ctx context.Context, err error, what string) observation {
	var denied *egress.DeniedError
	if errors.As(err, &denied) {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonAddressNotAllowed,
			message: what + ": " + denied.Error()}
	}
	if ctx.Err() != nil || isTimeout(err) {
		return observation{result: autorebootv1alpha1.ResultFailure, message: what + ": timed out"}
	}
	if isDialError(err) {
		return observation{result: autorebootv1alpha1.ResultFailure, message: what + ": " + egress.ErrConnectionFailed.Error()}
	}
	return observation{result: autorebootv1alpha1.ResultFailure, message: what + ": request failed"}
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
