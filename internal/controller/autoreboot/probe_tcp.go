package autoreboot

import (
	"context"
	"fmt"
	"net"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// tcpProber succeeds when a TCP connection opens.
type tcpProber struct {
	dialer *net.Dialer
	addr   string
}

func newTCPProber(f *probers, t autorebootv1alpha1.Trigger) (prober, error) {
	s := t.Probe.TCPSocket
	if s.Port.Type != 0 {
		return nil, fmt.Errorf("tcpSocket port %q: named ports need a pod", s.Port.StrVal)
	}
	addr, err := probeAddress(s.Host, t.ProbeHost, s.Port.IntValue())
	if err != nil {
		return nil, err
	}
	return &tcpProber{dialer: f.dialer, addr: addr}, nil
}

func (p *tcpProber) kind() string { return typeTCP }
func (p *tcpProber) close()       {}

func (p *tcpProber) probe(ctx context.Context) observation {
	conn, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return dialObservation(err, "dial "+p.addr)
	}
	_ = conn.Close()
	return observation{result: autorebootv1alpha1.ResultSuccess}
}
