package autoreboot

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// grpcProber calls grpc.health.v1.Health/Check; SERVING is a success, like
// the kubelet's grpc probe.
type grpcProber struct {
	dialer  *net.Dialer
	addr    string
	service string
}

func newGRPCProber(f *probers, t autorebootv1alpha1.Trigger) prober {
	g := t.Probe.GRPC
	addr, _ := probeAddress(t.ProbeHost, "", int(g.Port))
	p := &grpcProber{dialer: f.dialer, addr: addr}
	if g.Service != nil {
		p.service = *g.Service
	}
	return p
}

func (p *grpcProber) kind() string { return typeGRPC }
func (p *grpcProber) close()       {}

func (p *grpcProber) probe(ctx context.Context) observation {
	if p.addr == "" {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: "grpc probe needs trigger.probeHost"}
	}
	// Dial through the guarded dialer first so a refused address is a
	// configuration error, not a failure.
	conn, err := grpc.NewClient("passthrough:///"+p.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.dialer.DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: err.Error()}
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: p.service})
	if err != nil {
		c, derr := p.dialer.DialContext(ctx, "tcp", p.addr)
		if derr != nil {
			return dialObservation(derr, "grpc "+p.addr)
		}
		_ = c.Close()
		return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("grpc %s: %v", p.addr, err)}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return observation{result: autorebootv1alpha1.ResultFailure, message: fmt.Sprintf("grpc %s: %s", p.addr, resp.GetStatus())}
	}
	return observation{result: autorebootv1alpha1.ResultSuccess}
}
