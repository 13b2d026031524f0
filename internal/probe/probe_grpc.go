package probe

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
)

// maxGRPCResponse bounds what a health server may send: a HealthCheckResponse
// is a few bytes, and a hostile server must not make the manager buffer
// gRPC's default 4 MiB.
const maxGRPCResponse = 4 << 10

// grpcProber calls grpc.health.v1.Health/Check; SERVING is a success, like
// the kubelet's grpc probe.
type grpcProber struct {
	dialer  *net.Dialer
	addr    string
	service string
}

func newGRPCProber(network *egress.Policy, namespace string, t autorebootv1alpha1.Trigger) Prober {
	g := t.Probe.GRPC
	addr, _ := probeAddress(t.ProbeHost, "", int(g.Port))
	p := &grpcProber{dialer: network.Dialer(namespace, 0), addr: addr}
	if g.Service != nil {
		p.service = *g.Service
	}
	return p
}

func (p *grpcProber) Kind() string { return TypeGRPC }
func (p *grpcProber) Close()       {}

func (p *grpcProber) Probe(ctx context.Context) Observation {
	if p.addr == "" {
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonInvalidSpec, Message: "grpc probe needs trigger.probeHost"}
	}
	// Connect first through the guarded dialer, so that a refused address
	// is reported as such and not as gRPC's generic unavailability.
	raw, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return networkObservation(ctx, err, "grpc "+p.addr)
	}
	// gRPC takes the checked connection first; a reconnect dials (and is
	// checked) anew.
	first := make(chan net.Conn, 1)
	first <- raw
	defer func() {
		select {
		case c := <-first:
			_ = c.Close()
		default:
		}
	}()
	conn, err := grpc.NewClient("passthrough:///"+p.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCResponse)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			select {
			case c := <-first:
				return c, nil
			default:
				return p.dialer.DialContext(ctx, "tcp", addr)
			}
		}),
	)
	if err != nil {
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonInvalidSpec, Message: "grpc " + p.addr + ": invalid target"}
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: p.service})
	if err != nil {
		return networkObservation(ctx, err, "grpc "+p.addr)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Observation{Result: autorebootv1alpha1.ResultFailure, Message: fmt.Sprintf("grpc %s: %s", p.addr, resp.GetStatus())}
	}
	return Observation{Result: autorebootv1alpha1.ResultSuccess}
}
