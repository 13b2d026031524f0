package probe

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
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
func testProbers(t testing.TB, reader client.Reader, settings Settings, allow ...string) *Probers {
	t.Helper()
	rules, err := egress.ParseRules(strings.Join(allow, ","))
	if err != nil {
		t.Fatal(err)
	}
	network := egress.New(egress.Settings{Allow: rules}, emptyCluster{})
	return NewProbers(settings, reader, testKeys(t), network, clock.RealClock{}).WithReferences(reader, newRefIndex(), testWorkloads{})
}

// testWorkloads reads the three target kinds as the controller does.
type testWorkloads struct{}

func (testWorkloads) NewObject(kind autorebootv1alpha1.TargetKind) client.Object {
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		return &appsv1.Deployment{}
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}
	}
	return nil
}

func (testWorkloads) NewList(kind autorebootv1alpha1.TargetKind) client.ObjectList {
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		return &appsv1.DeploymentList{}
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSetList{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSetList{}
	}
	return nil
}

func (testWorkloads) TemplateVersion(obj client.Object) string {
	return strconv.FormatInt(obj.GetGeneration(), 10)
}

func (testWorkloads) PodSpec(obj client.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	}
	return &corev1.PodSpec{}
}

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(autorebootv1alpha1.AddToScheme(scheme))
	return scheme
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
