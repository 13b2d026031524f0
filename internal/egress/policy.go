package egress

import (
	"context"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Settings are the admin's choices (manager flags).
type Settings struct {
	// Deny rules win over everything but the Unix socket list; Allow rules
	// win over every built-in denial, metadata and loopback included.
	Allow, Deny []Rule
	// AllowLinkLocal lifts the denial of 169.254.0.0/16 and fe80::/10. The
	// metadata endpoints stay denied, and link-local multicast stays denied
	// as multicast; an Allow rule opens them if really wanted.
	AllowLinkLocal bool
	// AllowUnixSockets are the socket paths tenants may dial, compared as
	// exact strings: no cleaning, no symlink resolution.
	AllowUnixSockets []string
	// PodCIDRs, if set, limit pod lookups to these ranges, saving a
	// cluster-wide pod list per new address. Empty looks up every address
	// that is no Service IP, which also finds node IPs through their
	// hostNetwork pods; with PodCIDRs set, node IPs outside them are
	// allowed unless a Deny rule covers them.
	PodCIDRs []netip.Prefix
	// SelfAddrs are the manager's own addresses (see LocalAddrs).
	SelfAddrs []netip.Addr
}

// PodRef is what the policy needs to know of a pod holding an IP.
type PodRef struct {
	Namespace   string
	HostNetwork bool
}

// Cluster is what only the apiserver knows. Implementations should cache:
// Check calls it on every dial. Returned slices must not be modified.
type Cluster interface {
	ServiceCIDRs(ctx context.Context) ([]netip.Prefix, error)
	// ServiceIPs are the cluster IPs of the Services in namespace.
	ServiceIPs(ctx context.Context, namespace string) ([]netip.Addr, error)
	PodsWithIP(ctx context.Context, ip netip.Addr) ([]PodRef, error)
	APIServerAddrs(ctx context.Context) ([]netip.Addr, error)
}

// Policy decides which addresses the probes of a namespace may dial. It is
// immutable and safe for concurrent use.
type Policy struct {
	allow, deny    []Rule
	allowLinkLocal bool
	unixSockets    []string
	podCIDRs       []netip.Prefix
	self           []netip.Addr
	cluster        Cluster
	denied         *prometheus.CounterVec
}

// New builds a policy. c must not be nil: without cluster knowledge every
// other namespace would be reachable.
func New(s Settings, c Cluster) *Policy {
	if c == nil {
		panic("egress.New: nil Cluster")
	}
	self := make([]netip.Addr, 0, len(s.SelfAddrs))
	for _, a := range s.SelfAddrs {
		self = append(self, a.WithZone("").Unmap())
	}
	return &Policy{
		allow:          slices.Clone(s.Allow),
		deny:           slices.Clone(s.Deny),
		allowLinkLocal: s.AllowLinkLocal,
		unixSockets:    slices.Clone(s.AllowUnixSockets),
		podCIDRs:       slices.Clone(s.PodCIDRs),
		self:           self,
		cluster:        c,
	}
}

// Check decides whether a probe of namespace may dial address on network;
// address is "ip:port" as the kernel will see it, or a socket path for
// "unix". It returns nil or a *DeniedError. ctx bounds the cluster lookups;
// an empty namespace owns no pod or Service.
func (p *Policy) Check(ctx context.Context, namespace, network, address string) error {
	category, cause := p.judge(ctx, namespace, network, address)
	if category == "" {
		return nil
	}
	if p.denied != nil {
		p.denied.WithLabelValues(category).Inc()
	}
	return &DeniedError{Category: category, Err: cause}
}

// judge returns the category of the denial, "" if allowed.
func (p *Policy) judge(ctx context.Context, namespace, network, address string) (string, error) {
	switch network {
	case "unix", "unixgram", "unixpacket":
		if slices.Contains(p.unixSockets, address) {
			return "", nil
		}
		return CategoryUnixSocket, nil
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return CategoryInvalidAddress, nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return CategoryInvalidAddress, err
	}
	forms := addrForms(ap.Addr())
	if matchAny(p.deny, forms, ap.Port()) {
		return CategoryAdminDeny, nil
	}
	// Allow rules see only the address as dialled: an admin who allows
	// 64:ff9b::/96 allows it, but allowing 127.0.0.1 must not open
	// 64:ff9b::7f00:1 by accident.
	if matchAny(p.allow, forms[:1], ap.Port()) {
		return "", nil
	}
	return p.builtIn(ctx, namespace, forms)
}

// builtIn applies the denials that need no lookup first, so that they hold
// while the apiserver is unreachable. Every form of the address must pass:
// the NAT64 form of another namespace's pod IP reaches that pod.
func (p *Policy) builtIn(ctx context.Context, namespace string, forms []netip.Addr) (string, error) {
	for _, a := range forms {
		if c := p.staticCategory(a); c != "" {
			return c, nil
		}
	}
	apiAddrs, err := p.cluster.APIServerAddrs(ctx)
	if err != nil {
		return CategoryLookupFailed, err
	}
	if containsAny(apiAddrs, forms) {
		return CategoryAPIServer, nil
	}
	for _, a := range forms {
		if c, err := p.inCluster(ctx, namespace, a); c != "" {
			return c, err
		}
	}
	return "", nil
}

// inCluster applies the Service and pod rules to a.
func (p *Policy) inCluster(ctx context.Context, namespace string, a netip.Addr) (string, error) {
	cidrs, err := p.cluster.ServiceCIDRs(ctx)
	if err != nil {
		return CategoryLookupFailed, err
	}
	if prefixesContain(cidrs, a) {
		return p.serviceCategory(ctx, namespace, a)
	}
	if len(p.podCIDRs) > 0 && !prefixesContain(p.podCIDRs, a) {
		return "", nil
	}
	return p.podCategory(ctx, namespace, a)
}

// serviceCategory judges an address inside a ServiceCIDR. An unassigned one
// is denied too: it may be assigned to another namespace's Service before
// the cache notices.
func (p *Policy) serviceCategory(ctx context.Context, namespace string, a netip.Addr) (string, error) {
	ips, err := p.cluster.ServiceIPs(ctx, namespace)
	if err != nil {
		return CategoryLookupFailed, err
	}
	if containsAny(ips, []netip.Addr{a}) {
		return "", nil
	}
	return CategoryServiceOtherNamespace, nil
}

// podCategory denies the IPs of pods in other namespaces, and of hostNetwork
// pods, whose IP is their node's: the kubelet and everything else listening
// on the node.
func (p *Policy) podCategory(ctx context.Context, namespace string, a netip.Addr) (string, error) {
	pods, err := p.cluster.PodsWithIP(ctx, a)
	if err != nil {
		return CategoryLookupFailed, err
	}
	for _, pod := range pods {
		if pod.HostNetwork || pod.Namespace != namespace {
			return CategoryPodOtherNamespace, nil
		}
	}
	return "", nil
}

// containsAny compares unmapped, since a Cluster may return either form.
func containsAny(list, addrs []netip.Addr) bool {
	for _, l := range list {
		if slices.Contains(addrs, l.WithZone("").Unmap()) {
			return true
		}
	}
	return false
}

func prefixesContain(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
