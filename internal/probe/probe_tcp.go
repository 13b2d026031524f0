package probe

import (
	"context"
	"net"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
)

// tcpProber succeeds when a TCP connection opens.
type tcpProber struct {
	dialer *net.Dialer
	addr   string
}

func newTCPProber(network *egress.Policy, namespace string, t autorebootv1alpha1.Trigger) (Prober, error) {
	s := t.Probe.TCPSocket
	addr, err := probeAddress(s.Host, t.ProbeHost, s.Port.IntValue())
	if err != nil {
		return nil, err
	}
	return &tcpProber{dialer: network.Dialer(namespace, 0), addr: addr}, nil
}

func (p *tcpProber) Kind() string { return TypeTCP }
func (p *tcpProber) Close()       {}

func (p *tcpProber) Probe(ctx context.Context) Observation {
	conn, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return networkObservation(ctx, err, "dial "+p.addr)
	}
	_ = conn.Close()
	return Observation{Result: autorebootv1alpha1.ResultSuccess}
}
