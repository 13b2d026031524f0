package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const allowed = "" // the want of cases that must pass

type checkCase struct {
	name     string
	settings Settings
	fail     map[string]bool
	ns       string // "team-a" if empty
	network  string // "tcp" if empty
	addr     string
	want     string
	// noPodLookup asserts that the cluster was not asked for pods.
	noPodLookup bool
}

func mustRules(t *testing.T, s string) []Rule {
	t.Helper()
	r, err := ParseRules(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func builtInCases() []checkCase {
	linkLocalOK := Settings{AllowLinkLocal: true}
	return []checkCase{
		{name: "loopback", addr: "127.0.0.1:80", want: CategoryLoopback},
		{name: "loopback /8", addr: "127.1.2.3:80", want: CategoryLoopback},
		{name: "loopback v6", addr: "[::1]:80", want: CategoryLoopback},
		{name: "unspecified", addr: "0.0.0.0:80", want: CategoryUnspecified},
		{name: "this network", addr: "0.1.2.3:80", want: CategoryUnspecified},
		{name: "unspecified v6", addr: "[::]:80", want: CategoryUnspecified},
		{name: "mapped loopback", addr: "[::ffff:127.0.0.1]:80", want: CategoryLoopback},
		{name: "mapped metadata", addr: "[::ffff:169.254.169.254]:80", want: CategoryMetadata},
		{name: "metadata", addr: "169.254.169.254:80", want: CategoryMetadata},
		{name: "metadata with link-local allowed", settings: linkLocalOK, addr: "169.254.169.254:80", want: CategoryMetadata},
		{name: "ECS credentials with link-local allowed", settings: linkLocalOK, addr: "169.254.170.2:80", want: CategoryMetadata},
		{name: "EKS pod identity", addr: "169.254.170.23:80", want: CategoryMetadata},
		{name: "Alibaba metadata", addr: "100.100.100.200:80", want: CategoryMetadata},
		{name: "AWS metadata v6", addr: "[fd00:ec2::254]:80", want: CategoryMetadata},
		{name: "EKS pod identity v6", addr: "[fd00:ec2::23]:80", want: CategoryMetadata},
		{name: "GCP metadata v6", addr: "[fd20:ce::254]:80", want: CategoryMetadata},
		{name: "NAT64 metadata", addr: "[64:ff9b::a9fe:a9fe]:80", want: CategoryMetadata},
		{name: "NAT64 loopback", addr: "[64:ff9b::7f00:1]:80", want: CategoryLoopback},
		{name: "IPv4-compatible loopback", addr: "[::7f00:1]:80", want: CategoryLoopback},
		{name: "IPv4-compatible metadata", addr: "[::a9fe:a9fe]:80", want: CategoryMetadata},
		{name: "link-local", addr: "169.254.1.1:80", want: CategoryLinkLocal},
		{name: "link-local allowed", settings: linkLocalOK, addr: "169.254.1.1:80", want: allowed},
		{name: "link-local v6 with zone", addr: "[fe80::1%eth0]:80", want: CategoryLinkLocal},
		{name: "link-local v6 allowed", settings: linkLocalOK, addr: "[fe80::1%eth0]:80", want: allowed},
		{name: "multicast", addr: "224.0.0.1:80", want: CategoryMulticast},
		{name: "multicast with link-local allowed", settings: linkLocalOK, addr: "224.0.0.1:80", want: CategoryMulticast},
		{name: "multicast global", addr: "239.1.2.3:80", want: CategoryMulticast},
		{name: "multicast v6", addr: "[ff02::1]:80", want: CategoryMulticast},
		{name: "broadcast", network: "udp", addr: "255.255.255.255:67", want: CategoryMulticast},
		{name: "self", settings: Settings{SelfAddrs: addrs("10.244.0.9")}, addr: "10.244.0.9:8080", want: CategorySelf},
		{name: "self mapped", settings: Settings{SelfAddrs: addrs("::ffff:10.244.0.9")}, addr: "10.244.0.9:8080", want: CategorySelf},
		{name: "apiserver", addr: "192.168.1.2:6443", want: CategoryAPIServer},
		{name: "apiserver service", addr: "10.96.0.1:443", want: CategoryAPIServer},
		{name: "apiserver via NAT64", addr: "[64:ff9b::c0a8:102]:6443", want: CategoryAPIServer},
	}
}

func clusterCases() []checkCase {
	inPodCIDRs := Settings{PodCIDRs: prefixes("10.244.0.0/16")}
	return []checkCase{
		{name: "service own namespace", addr: "10.96.0.10:80", want: allowed, noPodLookup: true},
		{name: "service own namespace v6", addr: "[fd00:96::10]:80", want: allowed},
		{name: "service other namespace", addr: "10.96.0.20:80", want: CategoryServiceOtherNamespace, noPodLookup: true},
		{name: "service other namespace seen from it", ns: "team-b", addr: "10.96.0.20:80", want: allowed},
		{name: "service unassigned", addr: "10.96.5.5:80", want: CategoryServiceOtherNamespace},
		{name: "service unassigned v6", addr: "[fd00:96::5]:80", want: CategoryServiceOtherNamespace},
		{name: "service other namespace via NAT64", addr: "[64:ff9b::a60:14]:80", want: CategoryServiceOtherNamespace},
		{name: "pod own namespace", addr: "10.244.1.5:8080", want: allowed},
		{name: "pod other namespace", addr: "10.244.2.7:8080", want: CategoryPodOtherNamespace},
		{name: "pod other namespace in pod CIDRs", settings: inPodCIDRs, addr: "10.244.2.7:8080", want: CategoryPodOtherNamespace},
		{name: "pod IP shared with another namespace", addr: "10.244.3.3:8080", want: CategoryPodOtherNamespace},
		{name: "hostNetwork pod", addr: "192.168.1.10:10250", want: CategoryPodOtherNamespace},
		{name: "hostNetwork pod of own namespace", addr: "192.168.1.11:10250", want: CategoryPodOtherNamespace},
		{name: "outside pod CIDRs", settings: inPodCIDRs, addr: "192.168.1.10:10250", want: allowed, noPodLookup: true},
		{name: "internet", addr: "8.8.8.8:53", want: allowed},
		{name: "internet outside pod CIDRs", settings: inPodCIDRs, addr: "8.8.8.8:53", want: allowed, noPodLookup: true},
		{name: "internet v6", addr: "[2001:4860:4860::8888]:443", want: allowed},
		{name: "internet udp", network: "udp4", addr: "8.8.8.8:53", want: allowed},
		{name: "lookup ServiceCIDRs fails", fail: map[string]bool{"ServiceCIDRs": true}, addr: "8.8.8.8:53", want: CategoryLookupFailed},
		{name: "lookup ServiceIPs fails", fail: map[string]bool{"ServiceIPs": true}, addr: "10.96.0.10:80", want: CategoryLookupFailed},
		{name: "lookup PodsWithIP fails", fail: map[string]bool{"PodsWithIP": true}, addr: "10.244.1.5:80", want: CategoryLookupFailed},
		{name: "lookup APIServerAddrs fails", fail: map[string]bool{"APIServerAddrs": true}, addr: "8.8.8.8:53", want: CategoryLookupFailed},
		{name: "lookup failure after a static denial", fail: map[string]bool{"APIServerAddrs": true}, addr: "127.0.0.1:80", want: CategoryLoopback},
	}
}

func adminCases(t *testing.T) []checkCase {
	return []checkCase{
		{name: "allow exact port", settings: Settings{Allow: mustRules(t, "127.0.0.1:3306")}, addr: "127.0.0.1:3306", want: allowed},
		{name: "allow exact port, other port", settings: Settings{Allow: mustRules(t, "127.0.0.1:3306")}, addr: "127.0.0.1:3307", want: CategoryLoopback},
		{name: "allow metadata", settings: Settings{Allow: mustRules(t, "169.254.169.254")}, addr: "169.254.169.254:80", want: allowed},
		{name: "allow other namespace's pods", settings: Settings{Allow: mustRules(t, "10.244.0.0/16")}, addr: "10.244.2.7:80", want: allowed, noPodLookup: true},
		{name: "allow mapped", settings: Settings{Allow: mustRules(t, "127.0.0.1:3306")}, addr: "[::ffff:127.0.0.1]:3306", want: allowed},
		{name: "allow does not extend to NAT64", settings: Settings{Allow: mustRules(t, "127.0.0.1")}, addr: "[64:ff9b::7f00:1]:80", want: CategoryLoopback},
		{name: "allow NAT64 explicitly", settings: Settings{Allow: mustRules(t, "64:ff9b::/96")}, addr: "[64:ff9b::7f00:1]:80", want: allowed},
		{name: "deny", settings: Settings{Deny: mustRules(t, "8.8.8.8")}, addr: "8.8.8.8:53", want: CategoryAdminDeny},
		{name: "deny port only", settings: Settings{Deny: mustRules(t, "8.8.8.8:53")}, addr: "8.8.8.8:443", want: allowed},
		{name: "deny over allow", settings: Settings{Allow: mustRules(t, "8.8.8.0/24"), Deny: mustRules(t, "8.8.8.8")}, addr: "8.8.8.8:53", want: CategoryAdminDeny},
		{name: "allow beside deny", settings: Settings{Allow: mustRules(t, "8.8.8.0/24"), Deny: mustRules(t, "8.8.8.8")}, addr: "8.8.8.9:53", want: allowed},
		{name: "deny over allow of loopback", settings: Settings{Allow: mustRules(t, "127.0.0.1"), Deny: mustRules(t, "127.0.0.1:22")}, addr: "127.0.0.1:22", want: CategoryAdminDeny},
		{name: "deny NAT64 form", settings: Settings{Deny: mustRules(t, "8.8.8.8")}, addr: "[64:ff9b::808:808]:53", want: CategoryAdminDeny},
		{name: "deny mapped form", settings: Settings{Deny: mustRules(t, "8.8.8.8")}, addr: "[::ffff:8.8.8.8]:53", want: CategoryAdminDeny},
		{name: "deny zoned form", settings: Settings{AllowLinkLocal: true, Deny: mustRules(t, "fe80::/10")}, addr: "[fe80::1%eth0]:80", want: CategoryAdminDeny},
	}
}

func unixAndInvalidCases() []checkCase {
	sock := Settings{AllowUnixSockets: []string{"/run/db/ok.sock"}}
	return []checkCase{
		{name: "unix allowed path", settings: sock, network: "unix", addr: "/run/db/ok.sock", want: allowed},
		{name: "unix other path", settings: sock, network: "unix", addr: "/run/db/other.sock", want: CategoryUnixSocket},
		{name: "unix path not cleaned", settings: sock, network: "unix", addr: "/run/db/../db/ok.sock", want: CategoryUnixSocket},
		{name: "unix double slash", settings: sock, network: "unix", addr: "/run//db/ok.sock", want: CategoryUnixSocket},
		{name: "unix none allowed", network: "unix", addr: "/run/db/ok.sock", want: CategoryUnixSocket},
		{name: "unixgram", settings: sock, network: "unixgram", addr: "/run/db/other.sock", want: CategoryUnixSocket},
		{name: "unix not even with allow-all", settings: Settings{Allow: mustRulesNoT("0.0.0.0/0,::/0")}, network: "unix", addr: "/run/x.sock", want: CategoryUnixSocket},
		{name: "raw IP network", network: "ip4:icmp", addr: "8.8.8.8", want: CategoryInvalidAddress},
		{name: "host name", addr: "localhost:80", want: CategoryInvalidAddress},
		{name: "no port", addr: "8.8.8.8", want: CategoryInvalidAddress},
	}
}

func mustRulesNoT(s string) []Rule {
	r, err := ParseRules(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestCheck(t *testing.T) {
	var cases []checkCase
	cases = append(cases, builtInCases()...)
	cases = append(cases, clusterCases()...)
	cases = append(cases, adminCases(t)...)
	cases = append(cases, unixAndInvalidCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster()
			fc.fail = tc.fail
			ns, network := tc.ns, tc.network
			if ns == "" {
				ns = "team-a"
			}
			if network == "" {
				network = "tcp"
			}
			err := New(tc.settings, fc).Check(context.Background(), ns, network, tc.addr)
			if got := category(t, err); got != tc.want {
				t.Errorf("Check(%s %s) = %q, want %q", network, tc.addr, got, tc.want)
			}
			if calls := fc.podLookups(); tc.noPodLookup && len(calls) > 0 {
				t.Errorf("pod lookups %v, want none", calls)
			}
		})
	}
}

// category returns the category of a denial, "" for nil, and fails the test
// for any other error.
func category(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return allowed
	}
	var d *DeniedError
	if !errors.As(err, &d) {
		t.Fatalf("error %v is not a *DeniedError", err)
	}
	return d.Category
}

func TestLookupFailureKeepsCause(t *testing.T) {
	fc := newFakeCluster()
	fc.fail = map[string]bool{"PodsWithIP": true}
	err := New(Settings{}, fc).Check(context.Background(), "team-a", "tcp", "10.244.1.5:80")
	d, ok := errors.AsType[*DeniedError](err)
	if !ok || !errors.Is(d.Err, errFakeLookup) {
		t.Fatalf("Check = %#v, want a DeniedError carrying the lookup error", err)
	}
	if errors.Is(err, errFakeLookup) {
		t.Error("the lookup error should not be visible through errors.Is on the tenant's error")
	}
	if strings.Contains(err.Error(), errFakeLookup.Error()) {
		t.Errorf("Error() = %q shows the lookup error", err)
	}
}

func TestEmptyNamespaceMatchesNoPod(t *testing.T) {
	err := New(Settings{}, newFakeCluster()).Check(context.Background(), "", "tcp", "10.244.1.5:80")
	if got := category(t, err); got != CategoryPodOtherNamespace {
		t.Errorf("Check from namespace \"\" = %q, want %q", got, CategoryPodOtherNamespace)
	}
}

func TestDeniedErrorMessage(t *testing.T) {
	for _, c := range []string{CategoryUnixSocket, CategoryAdminDeny, CategoryUnspecified, CategoryLoopback,
		CategoryMetadata, CategoryMulticast, CategoryLinkLocal, CategorySelf, CategoryAPIServer,
		CategoryServiceOtherNamespace, CategoryPodOtherNamespace, CategoryLookupFailed, CategoryInvalidAddress} {
		err := &DeniedError{Category: c, Err: errFakeLookup}
		if err.Error() != "address not allowed by the manager's network policy" {
			t.Errorf("%s: Error() = %q", c, err)
		}
		if strings.Contains(err.Error(), c) {
			t.Errorf("%s: Error() %q names the category", c, err)
		}
	}
}

func TestNewCopiesSettings(t *testing.T) {
	s := Settings{Allow: mustRules(t, "127.0.0.1:3306"), AllowUnixSockets: []string{"/run/ok.sock"}}
	p := New(s, newFakeCluster())
	s.Allow[0] = mustRules(t, "127.0.0.1:22")[0]
	s.AllowUnixSockets[0] = "/run/other.sock"
	ctx := context.Background()
	if err := p.Check(ctx, "team-a", "tcp", "127.0.0.1:3306"); err != nil {
		t.Errorf("changing Settings after New changed the policy: %v", err)
	}
	if err := p.Check(ctx, "team-a", "unix", "/run/ok.sock"); err != nil {
		t.Errorf("changing Settings after New changed the policy: %v", err)
	}
}

func TestNewNilCluster(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with a nil Cluster did not panic")
		}
	}()
	New(Settings{}, nil)
}

func TestDeniedCounter(t *testing.T) {
	counter := NewDeniedCounter()
	base := New(Settings{}, newFakeCluster())
	p := base.WithDeniedCounter(counter)
	ctx := context.Background()
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "169.254.169.254:80", "8.8.8.8:53"} {
		_ = p.Check(ctx, "team-a", "tcp", addr)
	}
	_ = base.Check(ctx, "team-a", "tcp", "127.0.0.1:80")
	if n := seriesCount(counter); n != 2 {
		t.Errorf("%d series, want 2 (loopback, metadata)", n)
	}
	for c, want := range map[string]float64{CategoryLoopback: 2, CategoryMetadata: 1} {
		if got := counterValue(t, counter.WithLabelValues(c)); got != want {
			t.Errorf("denied{category=%q} = %v, want %v", c, got, want)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

func TestAddrForms(t *testing.T) {
	for in, want := range map[string][]netip.Addr{
		"10.1.2.3":           addrs("10.1.2.3"),
		"::ffff:10.1.2.3":    addrs("10.1.2.3"),
		"fe80::1%eth0":       addrs("fe80::1"),
		"64:ff9b::a01:203":   addrs("64:ff9b::a01:203", "10.1.2.3"),
		"::a01:203":          addrs("::a01:203", "10.1.2.3"),
		"::":                 addrs("::", "0.0.0.0"),
		"64:ff9b:1::a01:203": addrs("64:ff9b:1::a01:203"),
		"2001:db8::1":        addrs("2001:db8::1"),
	} {
		got := addrForms(netip.MustParseAddr(in))
		if len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) || (len(got) > 1 && got[1] != want[1]) {
			t.Errorf("addrForms(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestLocalAddrs(t *testing.T) {
	got, err := LocalAddrs()
	if err != nil {
		t.Fatal(err)
	}
	loopback := false
	for _, a := range got {
		if !a.IsValid() || a.Is4In6() {
			t.Errorf("LocalAddrs returned %v", a)
		}
		loopback = loopback || a.IsLoopback()
	}
	if !loopback {
		t.Errorf("LocalAddrs() = %v, want the loopback address among them", got)
	}
}
