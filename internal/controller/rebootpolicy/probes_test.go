package rebootpolicy

// Test helpers of the reconcile tests: real probers on a test network, and
// the trigger fixtures; the scripted probers are internal/probe/probetest's.

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
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
