package egress

import (
	"net/netip"
	"slices"
)

// metadataAddrs are cloud instance metadata and credential endpoints. They
// are denied even with Settings.AllowLinkLocal, which is about other
// link-local services; only an explicit Allow rule opens them.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),    // AWS, GCP, Azure, OpenStack, ... IMDS
	netip.MustParseAddr("169.254.170.2"),      // AWS ECS task credentials
	netip.MustParseAddr("169.254.170.23"),     // AWS EKS Pod Identity
	netip.MustParseAddr("100.100.100.200"),    // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),      // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),       // AWS EKS Pod Identity over IPv6
	netip.MustParseAddr("fd20:ce::254"),       // GCP metadata over IPv6
	netip.MustParseAddr("168.63.129.16"),      // Azure WireServer
	netip.MustParseAddr("fd00:c1::a9fe:a9fe"), // Oracle Cloud IMDS over IPv6
}

var (
	// thisNetwork is 0.0.0.0/8: Linux connects 0.0.0.0 to the local host,
	// and no remote service lives in the rest of it.
	thisNetwork      = netip.MustParsePrefix("0.0.0.0/8")
	limitedBroadcast = netip.MustParseAddr("255.255.255.255")
	ipv4Compatible   = netip.MustParsePrefix("::/96")
	nat64            = netip.MustParsePrefix("64:ff9b::/96")
)

// addrForms returns the dialled address without zone and unmapped, followed,
// for IPv4-compatible and NAT64 addresses, by the IPv4 address they carry:
// the kernel or a NAT64 gateway would reach that address, so a tenant must
// not get 127.0.0.1 or a metadata endpoint by writing it in IPv6.
func addrForms(a netip.Addr) []netip.Addr {
	a = a.WithZone("").Unmap()
	if !ipv4Compatible.Contains(a) && !nat64.Contains(a) {
		return []netip.Addr{a}
	}
	b := a.As16()
	return []netip.Addr{a, netip.AddrFrom4([4]byte(b[12:]))}
}

// staticCategory is the built-in denial of a that needs no cluster lookup.
// Metadata and multicast come before link-local so that their category does
// not depend on Settings.AllowLinkLocal: they are denied either way.
func (p *Policy) staticCategory(a netip.Addr) string {
	switch {
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return CategoryUnspecified
	case a.IsLoopback():
		return CategoryLoopback
	case slices.Contains(metadataAddrs, a):
		return CategoryMetadata
	case a.IsMulticast() || a == limitedBroadcast:
		return CategoryMulticast
	case a.IsLinkLocalUnicast() && !p.allowLinkLocal:
		return CategoryLinkLocal
	case slices.Contains(p.self, a):
		return CategorySelf
	}
	return ""
}
