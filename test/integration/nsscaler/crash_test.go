package nsscaler

import (
	"testing"

	. "github.com/onsi/gomega"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestCrashMidParkLosesNoOriginal stops the manager while it is parking 200
// Deployments, checks that every Deployment is either untouched or parked
// with its original recorded (never scaled without a record), lets a new
// manager finish, flips the whitelist to every namespace and checks that each
// Deployment comes back to exactly its original count.
func TestCrashMidParkLosesNoOriginal(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t, testenv.RandomName("crash"), 10, 20, func(i, j int) int32 { return int32((i*20+j)%5 + 1) })

	// A slow first manager (one write at a time, 20 a second) so that it is
	// stopped in the middle of the park.
	first := startManager(t, managerOptions{writeConcurrency: 1, writeQPS: 20})
	createScaler(t, f.scaler, scalingv1alpha1.NSScalerSpec{NamespacePrefix: f.prefix()})
	g.Eventually(f.annotated, timeout, poll).Should(BeNumerically(">=", 20))
	first.stop(t)

	parked := f.expectNoOriginalLost(g)
	t.Logf("first manager stopped after parking %d of %d Deployments", parked, f.size)

	startManager(t, managerOptions{})
	g.Eventually(f.allParked, timeout, poll).Should(Succeed())
	updateScaler(t, f.scaler, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = f.namespaces })
	g.Eventually(f.allRestored, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, f.scaler) // while the second manager runs
}
