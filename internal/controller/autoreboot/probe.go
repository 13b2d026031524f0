package autoreboot

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
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

// proberFactory builds probers; its fields are the manager-wide settings.
type proberFactory interface {
	newProber(s workerSpec) (prober, error)
}

// ProbeSettings are the manager-wide probe settings (flags in main).
type ProbeSettings struct {
	// ExecProbeDir enables exec probes for scripts inside this directory;
	// empty disables exec probes.
	ExecProbeDir string
	// AllowLinkLocal permits httpGet/tcpSocket/grpc probes to link-local
	// addresses (169.254.0.0/16, fe80::/10: cloud metadata endpoints).
	AllowLinkLocal bool
	// ExecOutputLimit caps the bytes of exec output kept (default 4 KiB).
	ExecOutputLimit int
}

// probers is the production proberFactory.
type probers struct {
	settings ProbeSettings
	// reader reads Secrets and watched objects live from the apiserver
	// (no cluster-wide cache of Secrets).
	reader client.Reader
	clock  clock.Clock
	dialer *net.Dialer
	http   *http.Client
}

func newProbers(settings ProbeSettings, reader client.Reader, clk clock.Clock) *probers {
	if settings.ExecOutputLimit <= 0 {
		settings.ExecOutputLimit = 4096
	}
	d := &net.Dialer{Control: linkLocalGuard(settings.AllowLinkLocal)}
	transport := &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // like kubelet HTTPS probes: no CA to verify against
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &probers{
		settings: settings,
		reader:   reader,
		clock:    clk,
		dialer:   d,
		http: &http.Client{
			Transport: transport,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 10 {
					return errors.New("stopped after 10 redirects")
				}
				return nil
			},
		},
	}
}

func (f *probers) newProber(s workerSpec) (prober, error) {
	t := s.Trigger
	switch {
	case t.Probe != nil && t.Probe.HTTPGet != nil:
		return newHTTPProber(f, t)
	case t.Probe != nil && t.Probe.TCPSocket != nil:
		return newTCPProber(f, t)
	case t.Probe != nil && t.Probe.GRPC != nil:
		return newGRPCProber(f, t), nil
	case t.Probe != nil && t.Probe.Exec != nil:
		return newExecProber(f.settings, t.Probe.Exec.Command), nil
	case t.SQL != nil:
		return newSQLProber(f.reader, s.Key.Object.Namespace, *t.SQL), nil
	case t.Watch != nil:
		return newWatchProber(f.reader, s.Key.Object.Namespace, *t.Watch), nil
	}
	return nil, fmt.Errorf("policy %s: trigger has no probe, sql or watch", s.Key.Policy)
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
	}
	return "unknown"
}

// errLinkLocal marks a dial refused by the link-local guard.
var errLinkLocal = errors.New("link-local address refused (cloud metadata); start the manager with --allow-link-local-probes to allow it")

// isLinkLocal reports whether ip is in 169.254.0.0/16 or fe80::/10.
func isLinkLocal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()
}

// linkLocalGuard checks the address actually dialled (after DNS, on every
// redirect), so neither a hostname nor a redirect can reach the metadata
// endpoint.
func linkLocalGuard(allow bool) func(network, address string, c syscall.RawConn) error {
	if allow {
		return nil
	}
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		if isLinkLocal(ap.Addr()) {
			return errLinkLocal
		}
		return nil
	}
}

// dialObservation turns a dial error into an observation: refused
// link-local addresses are configuration errors, everything else a failure.
func dialObservation(err error, what string) observation {
	if errors.Is(err, errLinkLocal) {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonLinkLocalRefused, message: what + ": " + errLinkLocal.Error()}
	}
	return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("%s: %v", what, err)}
}
