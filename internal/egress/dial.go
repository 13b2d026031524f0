package egress

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Dialer returns a dialer for the probes of namespace. Its ControlContext
// runs Check on the address of every socket it connects, after DNS
// resolution and on every Happy Eyeballs attempt; an HTTP client whose
// Transport dials through it is checked again on every redirect hop that
// opens a connection. Do not replace ControlContext or Control, and do not
// give such a Transport a Proxy: the policy would then judge the proxy, not
// the target.
func (p *Policy) Dialer(namespace string, timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		ControlContext: func(ctx context.Context, network, address string, _ syscall.RawConn) error {
			return p.Check(ctx, namespace, network, address)
		},
	}
}

// LocalAddrs returns the addresses of the host's interfaces, for
// Settings.SelfAddrs. It is a snapshot: addresses added later (DHCP, a new
// interface) are not covered.
func LocalAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := interfaceIP(a); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

func interfaceIP(a net.Addr) (netip.Addr, bool) {
	var ip net.IP
	switch a := a.(type) {
	case *net.IPNet:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap(), ok
}
