package nsscaler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/scaling"
	"github.com/runbook-dev/runbook/test/cluster"
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

	const namespaces, perNamespace = 20, 20
	original := map[client.ObjectKey]int32{}
	var names []string
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("kill-%02d", i)
		names = append(names, ns)
		createNamespace(t, ns, nil)
		for j := 0; j < perNamespace; j++ {
			replicas := int32((i+j)%4 + 1)
			name := fmt.Sprintf("d%02d", j)
			createDeployment(t, ns, name, ptr.To(replicas))
			original[client.ObjectKey{Namespace: ns, Name: name}] = replicas
		}
	}
	listAll := func(g Gomega) []appsv1.Deployment {
		var out []appsv1.Deployment
		for _, ns := range names {
			var l appsv1.DeploymentList
			g.Expect(k8s.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
			out = append(out, l.Items...)
		}
		g.Expect(out).To(HaveLen(namespaces * perNamespace))
		return out
	}
	annotated := func(g Gomega) int {
		n := 0
		for _, d := range listAll(g) {
			if _, ok := d.Annotations[scaling.AnnotationOriginal]; ok {
				n++
			}
		}
		return n
	}

	first, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler", "--nsscaler-write-concurrency=1")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { first.DumpLogsOnFailure(t.Failed()) }()
	createScaler(t, "kill", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "kill-"})
	g.Eventually(annotated, timeout, poll).Should(BeNumerically(">=", 10))
	first.Kill()

	parked := 0
	for _, d := range listAll(g) {
		key := client.ObjectKeyFromObject(&d)
		ann, ok := d.Annotations[scaling.AnnotationOriginal]
		if !ok {
			g.Expect(*d.Spec.Replicas).To(Equal(original[key]), "%s scaled without its original recorded", key)
			continue
		}
		parked++
		g.Expect(*d.Spec.Replicas).To(BeZero(), "%s annotated but not scaled", key)
		g.Expect(ann).To(Equal(parkedBy("kill", original[key])), "%s", key)
	}
	g.Expect(parked).To(BeNumerically("<", namespaces*perNamespace), "the first manager finished before it was killed")
	t.Logf("first manager killed after parking %d of %d Deployments", parked, namespaces*perNamespace)

	second, err := cluster.StartManager(ctx, bin, kcPath, "--controllers=nsscaler")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		g.Expect(second.Stop()).To(Succeed())
		second.DumpLogsOnFailure(t.Failed())
	}()
	g.Eventually(func(g Gomega) {
		for _, d := range listAll(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(*d.Spec.Replicas).To(BeZero(), "%s", key)
			g.Expect(d.Annotations[scaling.AnnotationOriginal]).To(Equal(parkedBy("kill", original[key])), "%s", key)
		}
	}, timeout, poll).Should(Succeed())
	updateScaler(t, "kill", func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = names })
	g.Eventually(func(g Gomega) {
		for _, d := range listAll(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(*d.Spec.Replicas).To(Equal(original[key]), "%s", key)
			g.Expect(d.Annotations).NotTo(HaveKey(scaling.AnnotationOriginal), "%s", key)
		}
	}, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, "kill") // while the second manager runs
}
