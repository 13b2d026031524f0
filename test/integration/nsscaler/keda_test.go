package nsscaler

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	nsscontroller "github.com/runbook-dev/runbook/internal/controller/nsscaler"
)

var scaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// createScaledObject creates a ScaledObject (the real CRD, generated from
// KEDA's API module) that autoscales the Deployment target with a cron
// trigger; pausedReplicas, when set, is the user's own pause.
func createScaledObject(t *testing.T, ns, name, target string, pausedReplicas *string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"name": target},
			"triggers": []any{map[string]any{"type": "cron", "metadata": map[string]any{
				"timezone": "Europe/Berlin", "start": "0 8 * * *", "end": "0 20 * * *", "desiredReplicas": "4",
			}}},
		},
	}}
	u.SetGroupVersionKind(scaledObjectGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	if pausedReplicas != nil {
		u.SetAnnotations(map[string]string{nsscontroller.AnnotationKEDAPausedReplicas: *pausedReplicas})
	}
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func scaledObjectAnnotations(g Gomega, ns, name string) map[string]string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(scaledObjectGVK)
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	return u.GetAnnotations()
}

// TestKEDAScaledObjectsArePausedNotFought: the Deployments that
// ScaledObjects autoscale are never written; their ScaledObjects are paused
// at 0 with the previous pause recorded, and restored exactly (removed, or
// back to the user's own pause). A Deployment without a ScaledObject in the
// same namespace is parked as usual (the control).
func TestKEDAScaledObjectsArePausedNotFought(t *testing.T) {
	startManager(t, managerOptions{})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "keda")
	// The CRD is KEDA's real schema, not a stand-in: a ScaledObject
	// without triggers is refused as KEDA's own API would refuse it.
	noTriggers := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"scaleTargetRef": map[string]any{"name": "web"}}}}
	noTriggers.SetGroupVersionKind(scaledObjectGVK)
	noTriggers.SetNamespace(ns)
	noTriggers.SetName("no-triggers")
	err := k8s.Create(context.Background(), noTriggers, client.DryRunAll)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a ScaledObject without triggers: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.triggers"))

	createDeployment(t, ns, "web", ptr.To[int32](3))
	createDeployment(t, ns, "api", ptr.To[int32](2))
	createDeployment(t, ns, "plain", ptr.To[int32](2))
	createScaledObject(t, ns, "web", "web", nil)
	createScaledObject(t, ns, "api", "api", ptr.To("2"))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p})

	g.Eventually(func(g Gomega) {
		g.Expect(scaledObjectAnnotations(g, ns, "web")).To(Equal(map[string]string{
			nsscontroller.AnnotationKEDAPausedReplicas: "0",
			nsscontroller.AnnotationOriginal:           nsscontroller.PauseOriginal(nil, name).Encode(),
		}))
		g.Expect(scaledObjectAnnotations(g, ns, "api")).To(Equal(map[string]string{
			nsscontroller.AnnotationKEDAPausedReplicas: "0",
			nsscontroller.AnnotationOriginal:           nsscontroller.PauseOriginal(ptr.To("2"), name).Encode(),
		}))
		g.Expect(deploymentState(g, ns, "plain")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		g.Expect(s.Status.ParkedWorkloads).To(Equal(int32(3)))
		g.Expect(s.Status.ParkedKinds).To(Equal([]scalingv1alpha1.WorkloadKind{{Group: "keda.sh", Kind: "ScaledObject"}}))
	}, timeout, poll).Should(Succeed())
	// Scaling them is KEDA's business: the Deployments are not touched.
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
	g.Expect(deploymentState(g, ns, "api")).To(Equal(state{Replicas: 2}))

	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(scaledObjectAnnotations(g, ns, "web")).To(BeEmpty())
		g.Expect(scaledObjectAnnotations(g, ns, "api")).To(Equal(map[string]string{nsscontroller.AnnotationKEDAPausedReplicas: "2"}))
		g.Expect(deploymentState(g, ns, "plain")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
	g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 3}))
}
