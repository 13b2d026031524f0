package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	cachecontroller "github.com/runbook-dev/runbook/internal/controller/cache"
)

// serviceMonitorCRD is a stand-in for prometheus-operator's CRD: same
// group, version and kind, schema left open.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
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
	crd := serviceMonitorCRD()
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(crd), crd); apierrors.IsNotFound(err) {
		// No prometheus-operator: the exporter runs, the condition says
		// why there is no ServiceMonitor.
		eventuallyCondition(t, ns, "monitored", cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, cachecontroller.ReasonServiceMonitorUnsupported)
		eventuallyDeployment(t, ns, "monitored", func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
		})
		// prometheus-operator gets installed.
		crd = serviceMonitorCRD()
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
	eventuallyCondition(t, ns, "monitored", cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, cachecontroller.ReasonAsExpected)

	// Disabling it deletes it.
	g.Expect(env.client.Get(ctx, key(ns, "monitored"), mc)).To(Succeed())
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.Exporter.ServiceMonitor.Enabled = false
	g.Expect(env.client.Patch(ctx, mc, patch)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.client.Get(ctx, key(ns, "monitored"), sm))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}
