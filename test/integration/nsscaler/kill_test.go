package nsscaler

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestManagerKilledMidParkLosesNoOriginal runs the real manager binary, kills
// it with SIGKILL (no graceful shutdown) while it parks 400 Deployments one
// at a time, and checks that no Deployment was scaled without its original
// recorded; a second binary then finishes and a whitelist flip restores every
// count exactly.
func TestManagerKilledMidParkLosesNoOriginal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	user, err := env.AddUser(envtest.User{Name: "nsscaler-kill-test", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	kcPath := filepath.Join(dir, "kubeconfig")
	g.Expect(os.WriteFile(kcPath, kubeconfig, 0o600)).To(Succeed())
	bin, err := cluster.BuildManager(ctx, dir)
	g.Expect(err).NotTo(HaveOccurred())

	f := newFleet(t, testenv.RandomName("kill"), 20, 20, func(i, j int) int32 { return int32((i+j)%4 + 1) })

	// One write at a time, 50 a second: the park of 400 takes about 8 s,
	// long enough to be killed in the middle whatever the machine's speed.
	first, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler",
		"--nsscaler-write-concurrency=1", "--nsscaler-write-qps=50")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { first.DumpLogsOnFailure(t.Failed()) }()
	createScaler(t, f.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: f.prefix()})
	g.Eventually(f.annotated, timeout, poll).Should(BeNumerically(">=", 10))
	first.Kill()

	parked := f.expectNoOriginalLost(g)
	t.Logf("first manager killed after parking %d of %d Deployments", parked, f.size)

	second, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		g.Expect(second.Stop()).To(Succeed())
		second.DumpLogsOnFailure(t.Failed())
	}()
	g.Eventually(f.allParked, timeout, poll).Should(Succeed())
	updateScaler(t, f.scaler, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = f.namespaces })
	g.Eventually(f.allRestored, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, f.scaler) // while the second manager runs
}
