package nsscaler

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/scaling"
)

// TestCrashMidParkLosesNoOriginal stops the manager while it is parking 200
// Deployments, checks that every Deployment is either untouched or parked
// with its original recorded (never scaled without a record), lets a new
// manager finish, flips the whitelist to every namespace and checks that each
// Deployment comes back to exactly its original count.
func TestCrashMidParkLosesNoOriginal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const namespaces, perNamespace = 10, 20
	original := map[client.ObjectKey]int32{}
	var names []string
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("crash-%02d", i)
		names = append(names, ns)
		createNamespace(t, ns, nil)
		for j := 0; j < perNamespace; j++ {
			replicas := int32((i*perNamespace+j)%5 + 1)
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

	// A slow first manager (one write at a time, 20 requests/s) so that it
	// is stopped in the middle of the park.
	first := startManager(t, managerOptions{writeConcurrency: 1, qps: 20})
	createScaler(t, "crash", scalingv1alpha1.NSScalerSpec{NamespacePrefix: "crash-"})
	g.Eventually(func(g Gomega) int {
		n := 0
		for _, d := range listAll(g) {
			if _, ok := d.Annotations[scaling.AnnotationOriginal]; ok {
				n++
			}
		}
		return n
	}, timeout, poll).Should(BeNumerically(">=", 20))
	first.stop(t)

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
		g.Expect(ann).To(Equal(parkedBy("crash", original[key])), "%s", key)
	}
	g.Expect(parked).To(BeNumerically("<", namespaces*perNamespace), "the first manager finished before it was stopped")
	t.Logf("first manager stopped after parking %d of %d Deployments", parked, namespaces*perNamespace)

	startManager(t, managerOptions{})
	g.Eventually(func(g Gomega) {
		for _, d := range listAll(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(*d.Spec.Replicas).To(BeZero(), "%s", key)
			g.Expect(d.Annotations[scaling.AnnotationOriginal]).To(Equal(parkedBy("crash", original[key])), "%s", key)
		}
	}, timeout, poll).Should(Succeed())

	updateScaler(t, "crash", func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = names })
	g.Eventually(func(g Gomega) {
		for _, d := range listAll(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(*d.Spec.Replicas).To(Equal(original[key]), "%s", key)
			g.Expect(d.Annotations).NotTo(HaveKey(scaling.AnnotationOriginal), "%s", key)
		}
	}, timeout, poll).Should(Succeed())
	deleteScalerAndWait(t, "crash") // while the second manager runs
}
