package egress

import (
	"context"
	"errors"
	"net/netip"
	"sync"
)

var errFakeLookup = errors.New("fake lookup failed")

// fakeCluster answers from maps and records the pod lookups it was asked.
type fakeCluster struct {
	cidrs     []netip.Prefix
	services  map[string][]netip.Addr
	pods      map[netip.Addr][]PodRef
	apiServer []netip.Addr
	// fail names the methods that return errFakeLookup.
	fail map[string]bool

	mu       sync.Mutex
	podCalls []netip.Addr
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// newFakeCluster is the cluster of the policy tests: Services in
// 10.96.0.0/16 and fd00:96::/112, pods in 10.244.0.0/16, nodes in
// 192.168.1.0/24.
func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		cidrs: prefixes("10.96.0.0/16", "fd00:96::/112"),
		services: map[string][]netip.Addr{
			"team-a": addrs("10.96.0.10", "fd00:96::10"),
			"team-b": addrs("10.96.0.20"),
		},
		pods: map[netip.Addr][]PodRef{
			netip.MustParseAddr("10.244.1.5"):   {{Namespace: "team-a"}},
			netip.MustParseAddr("10.244.2.7"):   {{Namespace: "team-b"}},
			netip.MustParseAddr("10.244.3.3"):   {{Namespace: "team-a"}, {Namespace: "team-b"}},
			netip.MustParseAddr("192.168.1.10"): {{Namespace: "kube-system", HostNetwork: true}},
			netip.MustParseAddr("192.168.1.11"): {{Namespace: "team-a", HostNetwork: true}},
		},
		apiServer: addrs("10.96.0.1", "192.168.1.2"),
	}
}

func (f *fakeCluster) err(method string) error {
	if f.fail[method] {
		return errFakeLookup
	}
	return nil
}

func (f *fakeCluster) ServiceCIDRs(context.Context) ([]netip.Prefix, error) {
	return f.cidrs, f.err("ServiceCIDRs")
}

func (f *fakeCluster) ServiceIPs(_ context.Context, ns string) ([]netip.Addr, error) {
	return f.services[ns], f.err("ServiceIPs")
}

func (f *fakeCluster) PodsWithIP(_ context.Context, ip netip.Addr) ([]PodRef, error) {
	f.mu.Lock()
	f.podCalls = append(f.podCalls, ip)
	f.mu.Unlock()
	return f.pods[ip], f.err("PodsWithIP")
}

func (f *fakeCluster) APIServerAddrs(context.Context) ([]netip.Addr, error) {
	return f.apiServer, f.err("APIServerAddrs")
}

func (f *fakeCluster) podLookups() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]netip.Addr(nil), f.podCalls...)
}
