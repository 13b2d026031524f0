package egress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// apiFixture is an APICluster over controller-runtime's fake client that
// counts reads by list type and can make them fail.
type apiFixture struct {
	client  client.WithWatch
	clock   *clocktesting.FakeClock
	cluster *APICluster

	mu    sync.Mutex
	calls map[string]int
	fail  map[string]error // by list type ("*v1.PodList") or "get"
	logs  []string
}

func newAPIFixture(t *testing.T, apiServerHost string, objs ...client.Object) *apiFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &apiFixture{calls: map[string]int{}, fail: map[string]error{}}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "status.podIP", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Status.PodIP}
		}).
		WithInterceptorFuncs(interceptor.Funcs{List: f.list, Get: f.get}).
		Build()
	f.clock = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	log := funcr.New(func(_, args string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logs = append(f.logs, args)
	}, funcr.Options{})
	f.cluster = NewAPICluster(f.client, apiServerHost, f.clock, log)
	return f
}

func (f *apiFixture) record(kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind]++
	return f.fail[kind]
}

func (f *apiFixture) list(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	if err := f.record(fmt.Sprintf("%T", list)); err != nil {
		return err
	}
	return c.List(ctx, list, opts...)
}

func (f *apiFixture) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.record("get"); err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

func (f *apiFixture) setFail(kind string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[kind] = err
}

func (f *apiFixture) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

func (f *apiFixture) logCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.logs)
}

const (
	cidrList  = "*v1.ServiceCIDRList"
	svcList   = "*v1.ServiceList"
	podList   = "*v1.PodList"
	sliceList = "*v1.EndpointSliceList"
)

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func service(ns, name string, ips ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIPs: ips}}
	if len(ips) > 0 {
		svc.Spec.ClusterIP = ips[0]
	}
	return svc
}

func pod(ns, name, ip string, hostNetwork bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{HostNetwork: hostNetwork},
		Status:     corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func endpointSlice(name, service string, ips ...string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: ips}},
	}
}

func sortedAddrs(a []netip.Addr) []netip.Addr {
	a = slices.Clone(a)
	slices.SortFunc(a, netip.Addr.Compare)
	return a
}

func TestAPIClusterServiceCIDRs(t *testing.T) {
	f := newAPIFixture(t, "", serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:96::/112"))
	ctx := context.Background()
	want := prefixes("10.96.0.0/16", "fd00:96::/112")
	for range 2 {
		got, err := f.cluster.ServiceCIDRs(ctx)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ServiceCIDRs = %v, %v; want %v", got, err, want)
		}
	}
	if err := f.client.Create(ctx, serviceCIDR("extra", "10.100.0.0/24")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(serviceCIDRTTL - time.Second)
	if got, _ := f.cluster.ServiceCIDRs(ctx); len(got) != 2 || f.count(cidrList) != 1 {
		t.Fatalf("before the TTL: %v after %d lists, want the cached 2 after 1", got, f.count(cidrList))
	}
	f.clock.Step(time.Second)
	if got, _ := f.cluster.ServiceCIDRs(ctx); len(got) != 3 || f.count(cidrList) != 2 {
		t.Fatalf("after the TTL: %v after %d lists, want 3 after 2", got, f.count(cidrList))
	}
	if f.logCount() != 0 {
		t.Errorf("logged %v with ServiceCIDRs present", f.logs)
	}
}

func TestAPIClusterServiceCIDRsAbsent(t *testing.T) {
	for name, absent := range map[string]error{
		"no match":  &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "networking.k8s.io", Kind: "ServiceCIDR"}, SearchedVersions: []string{"v1"}},
		"not found": apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, ""),
	} {
		t.Run(name, func(t *testing.T) {
			f := newAPIFixture(t, "")
			ctx := context.Background()
			f.setFail(cidrList, absent)
			for range 2 {
				if got, err := f.cluster.ServiceCIDRs(ctx); err != nil || len(got) != 0 {
					t.Fatalf("ServiceCIDRs = %v, %v; want none, no error", got, err)
				}
				f.clock.Step(serviceCIDRTTL)
			}
			if f.count(cidrList) != 2 || f.logCount() != 1 {
				t.Fatalf("%d lists, %d notes; want 2 lists, 1 note", f.count(cidrList), f.logCount())
			}
			f.setFail(cidrList, nil)
			if err := f.client.Create(ctx, serviceCIDR("kubernetes", "10.96.0.0/16")); err != nil {
				t.Fatal(err)
			}
			if got, _ := f.cluster.ServiceCIDRs(ctx); len(got) != 1 {
				t.Fatalf("ServiceCIDRs once served = %v", got)
			}
			f.clock.Step(serviceCIDRTTL)
			f.setFail(cidrList, absent)
			_, _ = f.cluster.ServiceCIDRs(ctx)
			if f.logCount() != 2 {
				t.Errorf("%d notes, want a new one when the CIDRs disappear again", f.logCount())
			}
		})
	}
}

func TestAPIClusterErrorsAreNotCached(t *testing.T) {
	f := newAPIFixture(t, "", serviceCIDR("kubernetes", "10.96.0.0/16"))
	ctx := context.Background()
	f.setFail(cidrList, apierrors.NewForbidden(schema.GroupResource{Resource: "servicecidrs"}, "", nil))
	if _, err := f.cluster.ServiceCIDRs(ctx); err == nil {
		t.Fatal("ServiceCIDRs: no error when forbidden")
	}
	f.setFail(cidrList, nil)
	if got, err := f.cluster.ServiceCIDRs(ctx); err != nil || len(got) != 1 {
		t.Fatalf("ServiceCIDRs after the error = %v, %v", got, err)
	}
	if f.logCount() != 0 {
		t.Errorf("an error is not an absent API, logged %v", f.logs)
	}
}

func TestAPIClusterServiceIPs(t *testing.T) {
	headless := service("team-a", "headless", corev1.ClusterIPNone)
	external := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
	f := newAPIFixture(t, "", service("team-a", "web", "10.96.0.10", "fd00:96::10"), headless, external,
		service("team-b", "db", "10.96.0.20"))
	ctx := context.Background()
	want := addrs("10.96.0.10", "fd00:96::10")
	for range 2 {
		got, err := f.cluster.ServiceIPs(ctx, "team-a")
		if err != nil || !slices.Equal(sortedAddrs(got), want) {
			t.Fatalf("ServiceIPs(team-a) = %v, %v; want %v", got, err, want)
		}
	}
	if got, _ := f.cluster.ServiceIPs(ctx, "team-b"); !slices.Equal(got, addrs("10.96.0.20")) {
		t.Errorf("ServiceIPs(team-b) = %v", got)
	}
	if f.count(svcList) != 2 {
		t.Errorf("%d lists, want one per namespace", f.count(svcList))
	}
	if err := f.client.Create(ctx, service("team-a", "new", "10.96.0.11")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(serviceIPsTTL)
	if got, _ := f.cluster.ServiceIPs(ctx, "team-a"); len(got) != 3 {
		t.Errorf("ServiceIPs(team-a) after the TTL = %v, want the new Service too", got)
	}
	if _, err := f.cluster.ServiceIPs(ctx, ""); err == nil || f.count(svcList) != 3 {
		t.Errorf("ServiceIPs(\"\") = %v after %d lists; want an error and no list", err, f.count(svcList))
	}
}

func TestAPIClusterPodsWithIP(t *testing.T) {
	f := newAPIFixture(t, "",
		pod("team-a", "a1", "10.244.1.5", false),
		pod("team-b", "b1", "10.244.2.7", false),
		pod("kube-system", "kube-proxy", "192.168.1.10", true),
		pod("monitoring", "node-exporter", "192.168.1.10", true),
		pod("kube-system", "cilium", "192.168.1.10", true),
		pod("team-a", "v6", "fd00:244::5", false))
	ctx := context.Background()
	for _, tc := range []struct {
		ip   string
		want []PodRef
	}{
		{"10.244.1.5", []PodRef{{Namespace: "team-a"}}},
		{"::ffff:10.244.1.5", []PodRef{{Namespace: "team-a"}}},
		{"10.244.2.7", []PodRef{{Namespace: "team-b"}}},
		{"192.168.1.10", []PodRef{{Namespace: "kube-system", HostNetwork: true}, {Namespace: "monitoring", HostNetwork: true}}},
		{"fd00:244::5", []PodRef{{Namespace: "team-a"}}},
		{"10.244.9.9", []PodRef{}},
	} {
		got, err := f.cluster.PodsWithIP(ctx, netip.MustParseAddr(tc.ip))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("PodsWithIP(%s) = %v, %v; want %v", tc.ip, got, err, tc.want)
		}
	}
	if n := f.count(podList); n != 5 {
		t.Errorf("%d lists, want 5: the mapped form shares the cache entry", n)
	}
	_, _ = f.cluster.PodsWithIP(ctx, netip.MustParseAddr("10.244.9.9"))
	if n := f.count(podList); n != 5 {
		t.Errorf("%d lists, want the negative answer cached", n)
	}
	if err := f.client.Create(ctx, pod("team-b", "b2", "10.244.9.9", false)); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(podsTTL)
	if got, _ := f.cluster.PodsWithIP(ctx, netip.MustParseAddr("10.244.9.9")); len(got) != 1 || f.count(podList) != 6 {
		t.Errorf("PodsWithIP after the TTL = %v after %d lists, want the new pod after 6", got, f.count(podList))
	}
}

func TestAPIClusterPodCacheBound(t *testing.T) {
	f := newAPIFixture(t, "")
	f.cluster.pods.limit = 3
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		_, _ = f.cluster.PodsWithIP(ctx, netip.AddrFrom4([4]byte{10, 244, 0, byte(i)}))
	}
	if n := f.cluster.pods.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	_, _ = f.cluster.PodsWithIP(ctx, netip.MustParseAddr("10.244.0.1"))
	if n := f.cluster.pods.len(); n != 3 || f.count(podList) != 3 {
		t.Fatalf("a known key: %d entries after %d lists, want 3 after 3", n, f.count(podList))
	}
	_, _ = f.cluster.PodsWithIP(ctx, netip.MustParseAddr("10.244.0.4"))
	if n := f.cluster.pods.len(); n != 1 {
		t.Fatalf("%d entries after exceeding the bound, want 1", n)
	}
	_, _ = f.cluster.PodsWithIP(ctx, netip.MustParseAddr("10.244.0.1"))
	if n := f.count(podList); n != 5 {
		t.Errorf("%d lists, want the dropped entry looked up again", n)
	}
}

func TestTTLCacheBound(t *testing.T) {
	c := newTTLCache[int, bool](time.Minute, maxCacheEntries)
	now := time.Now()
	for i := range maxCacheEntries {
		c.put(now, i, true)
	}
	c.put(now, 0, false)
	if n := c.len(); n != maxCacheEntries {
		t.Fatalf("%d entries, want %d", n, maxCacheEntries)
	}
	c.put(now, maxCacheEntries, true)
	if n := c.len(); n != 1 {
		t.Fatalf("%d entries after exceeding the bound, want 1", n)
	}
	if v, ok := c.get(now.Add(time.Minute-time.Nanosecond), maxCacheEntries); !ok || !v {
		t.Error("entry missing before its TTL")
	}
	if _, ok := c.get(now.Add(time.Minute), maxCacheEntries); ok {
		t.Error("entry still there at its TTL")
	}
}

func TestAPIClusterAPIServerAddrs(t *testing.T) {
	f := newAPIFixture(t, "https://10.0.0.1:6443",
		service("default", "kubernetes", "10.96.0.1", "fd00:96::1"),
		endpointSlice("kubernetes", "kubernetes", "192.168.1.2", "192.168.1.3"),
		endpointSlice("other", "other", "192.168.1.99"))
	ctx := context.Background()
	want := addrs("10.0.0.1", "10.96.0.1", "192.168.1.2", "192.168.1.3", "fd00:96::1")
	for range 2 {
		got, err := f.cluster.APIServerAddrs(ctx)
		if err != nil || !slices.Equal(sortedAddrs(got), want) {
			t.Fatalf("APIServerAddrs = %v, %v; want %v", got, err, want)
		}
	}
	if f.count("get") != 1 || f.count(sliceList) != 1 {
		t.Errorf("%d gets, %d lists; want one each within the TTL", f.count("get"), f.count(sliceList))
	}
	f.clock.Step(apiServerTTL)
	f.setFail("get", apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "kubernetes", nil))
	if _, err := f.cluster.APIServerAddrs(ctx); err == nil {
		t.Error("APIServerAddrs: no error when the Service cannot be read")
	}
}

func TestAPIClusterAPIServerAddrsWithoutService(t *testing.T) {
	f := newAPIFixture(t, "[fd00::6443]")
	got, err := f.cluster.APIServerAddrs(context.Background())
	if err != nil || !slices.Equal(got, addrs("fd00::6443")) {
		t.Fatalf("APIServerAddrs = %v, %v", got, err)
	}
}

func TestAPIClusterAPIServerHostName(t *testing.T) {
	f := newAPIFixture(t, "https://localhost:6443")
	got, err := f.cluster.APIServerAddrs(context.Background())
	if err != nil || !slices.Contains(got, netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("APIServerAddrs = %v, %v; want localhost resolved", got, err)
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.1:6443":        "10.0.0.1",
		"https://[fd00::1]:6443":       "fd00::1",
		"https://api.example.com":      "api.example.com",
		"https://api.example.com/base": "api.example.com",
		"10.0.0.1:6443":                "10.0.0.1",
		"api.example.com:6443":         "api.example.com",
		"api.example.com":              "api.example.com",
		"10.0.0.1":                     "10.0.0.1",
		"fd00::1":                      "fd00::1",
		"[fd00::1]":                    "fd00::1",
		"[fd00::1]:6443":               "fd00::1",
		"":                             "",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPolicyWithAPICluster runs the policy on the production Cluster.
func TestPolicyWithAPICluster(t *testing.T) {
	f := newAPIFixture(t, "https://10.0.0.1:6443",
		serviceCIDR("kubernetes", "10.96.0.0/16"),
		service("default", "kubernetes", "10.96.0.1"),
		service("team-a", "web", "10.96.0.10"),
		service("team-b", "db", "10.96.0.20"),
		pod("team-a", "a1", "10.244.1.5", false),
		pod("team-b", "b1", "10.244.2.7", false),
		pod("kube-system", "kube-proxy", "192.168.1.10", true))
	p := New(Settings{}, f.cluster)
	ctx := context.Background()
	for addr, want := range map[string]string{
		"10.0.0.1:6443":      CategoryAPIServer,
		"10.96.0.1:443":      CategoryAPIServer,
		"10.96.0.10:80":      allowed,
		"10.96.0.20:5432":    CategoryServiceOtherNamespace,
		"10.96.0.30:80":      CategoryServiceOtherNamespace,
		"10.244.1.5:8080":    allowed,
		"10.244.2.7:8080":    CategoryPodOtherNamespace,
		"192.168.1.10:10250": CategoryPodOtherNamespace,
		"8.8.8.8:53":         allowed,
	} {
		if got := category(t, p.Check(ctx, "team-a", "tcp", addr)); got != want {
			t.Errorf("Check(%s) = %q, want %q", addr, got, want)
		}
	}
	f.clock.Step(podsTTL)
	f.setFail(podList, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil))
	if got := category(t, p.Check(ctx, "team-a", "tcp", "10.244.1.5:8080")); got != CategoryLookupFailed {
		t.Errorf("Check with pods forbidden = %q, want %q", got, CategoryLookupFailed)
	}
}
