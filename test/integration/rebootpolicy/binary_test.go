package rebootpolicy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
)

// managerBinary builds the manager and a kubeconfig for it; the tests
// below run the real binary so that it can be killed like a real leader.
func managerBinary(t *testing.T) (bin, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	user, err := env.AddUser(envtest.User{Name: "rebootpolicy-binary-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if bin, err = cluster.BuildManager(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return bin, kubeconfig
}

func startBinary(t *testing.T, bin, kubeconfig, ns string, args ...string) *cluster.Manager {
	t.Helper()
	all := append([]string{"--controllers=rebootpolicy", "--watch-namespaces=" + ns, "--operator-namespace=" + operatorNamespace,
		"--zap-log-level=info"}, args...)
	m, err := cluster.StartManager(context.Background(), bin, kubeconfig, all...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// binaryRBP is a RebootPolicy for the test's own manager binary (the
// suite's manager leaves it alone).
func binaryRBP(ns, name string, target autorebootv1alpha1.TargetRef) *autorebootv1alpha1.RebootPolicy {
	rbp := newRBP(ns, name, target, refsPolicy())
	rbp.Labels = map[string]string{externalManagerLabel: "binary"}
	return rbp
}

// TestManagerKilledMidSequenceResumesWithoutRepeating: 20 Deployments
// restart one at a time; the manager binary is killed (SIGKILL) in the
// middle; a second one finishes the sequence. No Deployment is restarted
// twice, never two roll out at once, and every one is restarted.
func TestManagerKilledMidSequenceResumesWithoutRepeating(t *testing.T) {
	const n = 20
	g := NewWithT(t)
	bin, kubeconfig := managerBinary(t)
	ns := createNamespace(t, "refs-kill")
	createFleet(t, ns, n)
	first := startBinary(t, bin, kubeconfig, ns)
	defer func() { first.DumpLogsOnFailure(t.Failed()) }()
	rbp := binaryRBP(ns, "rbp", fleetTarget())
	rbp.Spec.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: ptr.To[int32](1)}
	g.Expect(createRBP(t, rbp)).To(Succeed())
	trackedTargets(t, ns, "rbp", n)

	sim := newRolloutSim(ns, 2)
	setData(t, ns, "shared", "v", "1")
	g.Eventually(func(g Gomega) { g.Expect(sim.step(g)).To(BeNumerically(">=", 6)) }, 3*timeout, interval).Should(Succeed())
	first.Kill()
	killedAfter := sim.step(g)
	t.Logf("first manager killed after %d of %d restarts", killedAfter, n)

	second := startBinary(t, bin, kubeconfig, ns)
	defer func() {
		g.Expect(second.Stop()).To(Succeed())
		second.DumpLogsOnFailure(t.Failed())
	}()
	sim.run(t, n)
	g.Expect(sim.maxRolling).To(Equal(1), "two Deployments rolled out at once")
	sim.expectEachOnce(t, n)
	g.Eventually(func() int64 { return getRBP(t, ns, "rbp").Status.RestartCount }, timeout, interval).Should(Equal(int64(n)))
}

// TestManagerWideThrottle: six RebootPolicies, one Deployment each, all
// referencing one ConfigMap; --max-concurrent-restarts=2 keeps at most two
// rollouts in progress, and every Deployment is restarted exactly once.
func TestManagerWideThrottle(t *testing.T) {
	const n = 6
	g := NewWithT(t)
	bin, kubeconfig := managerBinary(t)
	ns := createNamespace(t, "refs-throttle")
	createFleet(t, ns, n)
	m := startBinary(t, bin, kubeconfig, ns, "--max-concurrent-restarts=2")
	defer func() {
		g.Expect(m.Stop()).To(Succeed())
		m.DumpLogsOnFailure(t.Failed())
	}()
	for i := range n {
		name := fmt.Sprintf("d%02d", i)
		g.Expect(createRBP(t, binaryRBP(ns, name, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: name}))).To(Succeed())
		trackedTargets(t, ns, name, 1)
	}
	sim := newRolloutSim(ns, 4)
	setData(t, ns, "shared", "v", "1")
	sim.run(t, n)
	g.Expect(sim.maxRolling).To(Equal(2), "the manager-wide limit was not kept (or never reached)")
	sim.expectEachOnce(t, n)
	for i := range n {
		g.Expect(getRBP(t, ns, fmt.Sprintf("d%02d", i)).Status.RestartCount).To(Equal(int64(1)))
	}
}
