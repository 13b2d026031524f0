package nsscaler

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

// fleet is the crash tests' Deployments: namespaces <scaler>-NN with
// perNamespace Deployments each, and the replica count each was created with.
// The scaler's name is random, so are the namespaces; it selects them with
// the prefix <scaler>-.
type fleet struct {
	scaler     string // the NSScaler that parks them
	namespaces []string
	size       int
	original   map[client.ObjectKey]int32
}

func newFleet(t *testing.T, scaler string, namespaces, perNamespace int, replicas func(i, j int) int32) *fleet {
	t.Helper()
	f := &fleet{scaler: scaler, size: namespaces * perNamespace, original: map[client.ObjectKey]int32{}}
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("%s-%02d", scaler, i)
		f.namespaces = append(f.namespaces, ns)
		createNamespace(t, ns, nil)
		for j := 0; j < perNamespace; j++ {
			name := fmt.Sprintf("d%02d", j)
			createDeployment(t, ns, name, ptr.To(replicas(i, j)))
			f.original[client.ObjectKey{Namespace: ns, Name: name}] = replicas(i, j)
		}
	}
	return f
}

// prefix selects the fleet's namespaces.
func (f *fleet) prefix() string { return f.scaler + "-" }

func (f *fleet) list(g Gomega) []appsv1.Deployment {
	var out []appsv1.Deployment
	for _, ns := range f.namespaces {
		var l appsv1.DeploymentList
		g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns))).To(Succeed())
		out = append(out, l.Items...)
	}
	g.Expect(out).To(HaveLen(f.size))
	return out
}

// annotated counts the Deployments whose original is recorded.
func (f *fleet) annotated(g Gomega) int {
	n := 0
	for _, d := range f.list(g) {
		if _, ok := d.Annotations[nsscontroller.AnnotationOriginal]; ok {
			n++
		}
	}
	return n
}

// expectNoOriginalLost checks what a manager stopped mid-park left: each
// Deployment is untouched, or parked with exactly its original recorded,
// never scaled without a record. It returns how many are parked.
func (f *fleet) expectNoOriginalLost(g Gomega) int {
	parked := 0
	for _, d := range f.list(g) {
		key := client.ObjectKeyFromObject(&d)
		ann, ok := d.Annotations[nsscontroller.AnnotationOriginal]
		if !ok {
			g.Expect(*d.Spec.Replicas).To(Equal(f.original[key]), "%s scaled without its original recorded", key)
			continue
		}
		parked++
		g.Expect(*d.Spec.Replicas).To(BeZero(), "%s annotated but not scaled", key)
		g.Expect(ann).To(Equal(parkedBy(f.scaler, f.original[key])), "%s", key)
	}
	g.Expect(parked).To(BeNumerically("<", f.size), "the first manager finished the park before it was stopped")
	return parked
}

// allParked: every Deployment at 0 with its original recorded.
func (f *fleet) allParked(g Gomega) {
	for _, d := range f.list(g) {
		key := client.ObjectKeyFromObject(&d)
		g.Expect(*d.Spec.Replicas).To(BeZero(), "%s", key)
		g.Expect(d.Annotations[nsscontroller.AnnotationOriginal]).To(Equal(parkedBy(f.scaler, f.original[key])), "%s", key)
	}
}

// allRestored: every Deployment back at its original, annotation gone.
func (f *fleet) allRestored(g Gomega) {
	for _, d := range f.list(g) {
		key := client.ObjectKeyFromObject(&d)
		g.Expect(*d.Spec.Replicas).To(Equal(f.original[key]), "%s", key)
		g.Expect(d.Annotations).NotTo(HaveKey(nsscontroller.AnnotationOriginal), "%s", key)
	}
}
