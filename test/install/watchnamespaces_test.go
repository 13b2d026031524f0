package install

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runbook-dev/runbook/test/cluster"
)

// TestWatchNamespaces runs the real manager with --watch-namespaces (the
// chart's watchNamespaces value): a Memcached in a watched namespace is
// reconciled, one elsewhere is left alone, and the cluster-scoped NSScaler
// still parks a namespace that is not in the list.
func TestWatchNamespaces(t *testing.T) {
	g := NewWithT(t)
	a := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	a.run(t, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: watched}
---
apiVersion: v1
kind: Namespace
metadata: {name: elsewhere}
---
apiVersion: cache.runbook.dev/v1alpha1
kind: Memcached
metadata: {name: cache, namespace: watched}
spec: {size: 1}
---
apiVersion: cache.runbook.dev/v1alpha1
kind: Memcached
metadata: {name: cache, namespace: elsewhere}
spec: {size: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: elsewhere}
spec:
  replicas: 2
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: c, image: nginx}]}
`), "apply", "--server-side", "-f", "-")

	bin, err := cluster.BuildManager(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.StartManager(ctx, bin, a.kubeconfig, "--controllers=memcached,nsscaler", "--watch-namespaces=watched")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = m.Stop()
		m.DumpLogsOnFailure(t.Failed())
	}()

	admin := a.adminClient(t)
	mcGVK := schema.GroupVersionKind{Group: "cache.runbook.dev", Version: "v1alpha1", Kind: "Memcached"}
	conditions := func(g Gomega, ns string) []any {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(mcGVK)
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, u)).To(Succeed())
		c, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return c
	}
	g.Eventually(func(g Gomega) {
		g.Expect(conditions(g, "watched")).NotTo(BeEmpty())
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "watched", Name: "cache"}, &appsv1.Deployment{})).To(Succeed())
	}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the Memcached in the watched namespace was not reconciled")

	// NSScaler is cluster-scoped: it parks "elsewhere" although the
	// namespace is not watched for namespaced kinds.
	a.run(t, []byte(`apiVersion: scaling.runbook.dev/v1alpha1
kind: NSScaler
metadata: {name: park-elsewhere}
spec: {namespacePrefix: elsewhere}
`), "apply", "--server-side", "-f", "-")
	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "app"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(BeZero())
	}).WithTimeout(2*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the NSScaler did not park a namespace outside --watch-namespaces")

	// By now the manager has long handled everything it watches: the other
	// Memcached has no status and no Deployment, and stays so.
	g.Consistently(func(g Gomega) {
		g.Expect(conditions(g, "elsewhere")).To(BeEmpty())
		err := admin.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "cache"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a Deployment for the unwatched Memcached: %v", err)
	}).WithTimeout(3 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}
