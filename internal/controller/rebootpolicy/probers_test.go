package rebootpolicy

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/internal/egress"
)

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
func testProbers(t testing.TB, reader client.Reader, settings ProbeSettings, allow ...string) *probers {
	t.Helper()
	rules, err := egress.ParseRules(strings.Join(allow, ","))
	if err != nil {
		t.Fatal(err)
	}
	network := egress.New(egress.Settings{Allow: rules}, emptyCluster{})
	return newProbers(settings, reader, testKeys(t), network, clock.RealClock{})
}

func nsName(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func mustPgConfig(t *testing.T, dsn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
