package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The seed demo with the manager installed by Helm in the cluster (the local
// manager paused): it reaches MariaDB, a server outside the cluster, at the
// host's end of the node's veth (a forwarder to the machine's loopback),
// which the chart's rebootpolicy.probeAllow allows. That address is also the
// apiserver's endpoint, which the manager refuses to tenants: another port
// of it, not allowed, stays refused.
func TestInClusterManagerSeedDemo(t *testing.T) {
	pauseHostManager(t)
	dbAddr, err := node.ForwardFromHost(0, "127.0.0.1:3306")
	must(t, err)
	otherAddr, err := node.ForwardFromHost(0, "127.0.0.1:3306")
	must(t, err)
	r := newRelease(t, restrictedNamespace(t))
	t0 := time.Now()
	r.install(t, map[string]any{
		"controllers":  map[string]any{"memcached": map[string]any{"enabled": false}, "nsscaler": map[string]any{"enabled": false}},
		"rebootpolicy": map[string]any{"probeAllow": []string{dbAddr}},
	})
	leader := r.leader(t, 5*time.Minute, "")
	t.Logf("helm install -> leader %s Ready: %.1fs; MariaDB forwarded at %s (allowed), %s (not allowed)",
		leader.Name, time.Since(t0).Seconds(), dbAddr, otherAddr)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kc.Kubectl(context.Background(), "-n", r.ns, "logs", leader.Name, "--tail", "60")
			t.Logf("leader's logs:\n%s", out)
		}
	})

	assertProbeRefused(t, otherAddr)
	runSeedDemo(t, dbAddr)
}

// assertProbeRefused: a policy whose DSN names addr, which probeAllow does
// not list, fails with AddressNotAllowed (the manager never connects).
func assertProbeRefused(t *testing.T, addr string) {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		StringData: map[string]string{"dsn": "u:p@tcp(" + addr + ")/test"},
	}))
	must(t, k8s.Create(ctx, realDeployment(ns, "web", 0)))
	must(t, k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-allowed"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target: autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			Policies: []autorebootv1alpha1.Policy{{
				Name: "db",
				Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
					Driver:         autorebootv1alpha1.DriverMySQL,
					DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"},
					Query:          "SELECT 1",
					PeriodSeconds:  2,
					TimeoutSeconds: 2,
				}},
			}},
		},
	}))
	eventually(t, 2*time.Minute, "the not-allowed policy's refusal", func() error {
		p := getPolicy(t, ns, "not-allowed")
		if len(p.Status.Policies) == 0 || p.Status.Policies[0].Reason != autorebootv1alpha1.ReasonAddressNotAllowed {
			return fmt.Errorf("status %+v", p.Status.Policies)
		}
		return nil
	})
}
