package rebootpolicy

// Test helpers shared with internal/probe's tests: a scripted probe
// factory and fake-clock workers for reconcile tests.

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/fingerprint"
	"github.com/runbook-dev/runbook/internal/probe"
)

const (
	ok   = autorebootv1alpha1.ResultSuccess
	fail = autorebootv1alpha1.ResultFailure
	errR = autorebootv1alpha1.ResultError
)

// fakeProbers hands out Probers whose results the test scripts.
type fakeProbers struct {
	mu      sync.Mutex
	results map[string][]string // by policy name; the last result repeats
	// observations, when set for a policy, are returned instead (the last
	// repeats): change and referenced triggers need fingerprints.
	observations map[string][]probe.Observation
	calls        map[string]*atomic.Int64
	created      map[string]int
	closed       map[string]int
}

func newFakeProbers() *fakeProbers {
	return &fakeProbers{results: map[string][]string{}, observations: map[string][]probe.Observation{}, calls: map[string]*atomic.Int64{},
		created: map[string]int{}, closed: map[string]int{}}
}

func (f *fakeProbers) setObservations(policy string, o ...probe.Observation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observations[policy] = o
}

func (f *fakeProbers) setResults(policy string, r ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[policy] = r
}

func (f *fakeProbers) callCounter(policy string) *atomic.Int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[policy] == nil {
		f.calls[policy] = &atomic.Int64{}
	}
	return f.calls[policy]
}

func (f *fakeProbers) NewProber(s probe.Spec) (probe.Prober, error) {
	calls := f.callCounter(s.Name)
	f.mu.Lock()
	f.created[s.Name]++
	f.mu.Unlock()
	return &fakeProber{f: f, policy: s.Name, calls: calls}, nil
}

type fakeProber struct {
	f      *fakeProbers
	policy string
	calls  *atomic.Int64
}

func (p *fakeProber) Kind() string { return "fake" }
func (p *fakeProber) Close() {
	p.f.mu.Lock()
	p.f.closed[p.policy]++
	p.f.mu.Unlock()
}
func (p *fakeProber) Probe(context.Context) probe.Observation {
	n := p.calls.Add(1)
	p.f.mu.Lock()
	r := p.f.results[p.policy]
	obs := p.f.observations[p.policy]
	p.f.mu.Unlock()
	if len(obs) > 0 {
		return obs[min(int(n-1), len(obs)-1)]
	}
	res := ok
	if len(r) > 0 {
		i := int(n - 1)
		if i >= len(r) {
			i = len(r) - 1
		}
		res = r[i]
	}
	return probe.Observation{Result: res, Message: res}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tick advances the fake clock by one period once the worker waits on its
// timer, and waits until the worker has published the probe's result (not
// merely started the probe).
func tick(t *testing.T, fc *clocktesting.FakeClock, w *probe.Workers, obj types.NamespacedName, policy string) {
	t.Helper()
	before := w.Snapshot(obj)[policy].Observed
	waitFor(t, "worker timer", fc.HasWaiters)
	fc.Step(time.Second)
	waitFor(t, "result published", func() bool { return w.Snapshot(obj)[policy].Observed > before })
}

func startWorkers(t *testing.T, f probe.Factory) (*probe.Workers, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := probe.NewWorkers(fc, f, NewMetrics(), logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, fc
}

func testKeys(t testing.TB) *fingerprint.Source {
	t.Helper()
	k, err := fingerprint.NewKey([]byte("unit-test-key-unit-test-key-0123"))
	if err != nil {
		t.Fatal(err)
	}
	return fingerprint.StaticSource(k)
}

func testKeyFor(t *testing.T) *fingerprint.Key {
	t.Helper()
	k, err := testKeys(t).Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// emptyCluster is a cluster with no Services, pods or apiserver addresses:
// only the built-in denials and the test's allow rules decide.
type emptyCluster struct{}

func (emptyCluster) ServiceCIDRs(context.Context) ([]netip.Prefix, error)     { return nil, nil }
func (emptyCluster) ServiceIPs(context.Context, string) ([]netip.Addr, error) { return nil, nil }
func (emptyCluster) PodsWithIP(context.Context, netip.Addr) ([]egress.PodRef, error) {
	return nil, nil
}
func (emptyCluster) APIServerAddrs(context.Context) ([]netip.Addr, error) { return nil, nil }

// testProbers builds the production probers with allow as the admin's
// --probe-allow (e.g. the test server's exact 127.0.0.1:port).
func testProbers(t testing.TB, reader client.Reader, settings probe.Settings, allow ...string) *probe.Probers {
	t.Helper()
	rules, err := egress.ParseRules(strings.Join(allow, ","))
	if err != nil {
		t.Fatal(err)
	}
	network := egress.New(egress.Settings{Allow: rules}, emptyCluster{})
	return probe.NewProbers(settings, reader, testKeys(t), network, clock.RealClock{})
}

func httpTrigger(host string, port int, path string) autorebootv1alpha1.Trigger {
	return autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt(port), Path: path}}}}
}

func splitHostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func nsName(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
