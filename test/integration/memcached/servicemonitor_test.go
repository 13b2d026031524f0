package memcached

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// serviceMonitorCRD is prometheus-operator's CRD with its real schema, so
// a ServiceMonitor field the controller misspells or misplaces is refused
// (or pruned and caught below) as in a real cluster.
func serviceMonitorCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(testenv.ServiceMonitorCRD())
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("%s: %v", testenv.ServiceMonitorCRD(), err)
	}
	return crd
}

func TestServiceMonitorOnlyWhenTheKindExists(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mc := newMemcached(ns, "monitored", cachev1alpha1.MemcachedSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true,
		ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: true, Interval: "15s", Labels: map[string]string{"release": "prom"}}}})
	create(t, mc)

	// The CRD stays installed once a run created it (deleting a CRD is
	// asynchronous and the manager's RESTMapper keeps a kind it has seen);
	// with -count > 1 later runs start from "installed".
	crd := serviceMonitorCRD(t)
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(crd), crd); apierrors.IsNotFound(err) {
		// No prometheus-operator: the exporter runs, the condition says
		// why there is no ServiceMonitor.
		eventuallyCondition(t, ns, "monitored", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachev1alpha1.ReasonServiceMonitorUnsupported)
		eventuallyDeployment(t, ns, "monitored", func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
		})
		// prometheus-operator gets installed.
		crd = serviceMonitorCRD(t)
		create(t, crd)
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		g.Expect(established).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed())

	sm := &unstructured.Unstructured{}
	sm.SetGroupVersionKind(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"})
	g.Eventually(func(g Gomega) {
		// The controller looks again on its own every few minutes; the
		// test does not wait for that.
		_, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "monitored")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.client.Get(ctx, key(ns, "monitored"), sm)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prom"))
	g.Expect(sm.GetOwnerReferences()).To(HaveLen(1))
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(endpoints).To(ConsistOf(HaveKeyWithValue("port", "metrics")))
	g.Expect(endpoints[0]).To(HaveKeyWithValue("interval", "15s"))
	g.Expect(endpoints[0]).To(HaveKeyWithValue("path", "/metrics"))
	// The real schema prunes unknown fields silently: everything the
	// controller writes must have survived.
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	g.Expect(match).NotTo(BeEmpty())
	names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	g.Expect(names).To(Equal([]string{ns}))
	eventuallyCondition(t, ns, "monitored", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected)

	// Disabling it deletes it.
	g.Expect(env.client.Get(ctx, key(ns, "monitored"), mc)).To(Succeed())
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Exporter.ServiceMonitor.Enabled = false
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.client.Get(ctx, key(ns, "monitored"), sm))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}
