package nsscaler

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestTenantWakesItsNamespace: a user who holds only the built-in `edit`
// ClusterRole in namespace a (a RoleBinding; the aggregated role of
// config/rbac gives `edit` the WakeRequests) may not patch the NSScaler, but
// creates a WakeRequest there: a's pods come back Running while b stays
// parked; the user cannot ask in b; deleting the request parks a again.
func TestTenantWakesItsNamespace(t *testing.T) {
	g := NewWithT(t)
	defer func() { manager.DumpLogsOnFailure(t.Failed()) }()
	ctx := context.Background()
	_, err := kc.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac", "wakerequest_editor_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	// The aggregation controller copies the rules into `edit`.
	g.Eventually(func(g Gomega) {
		var edit rbacv1.ClusterRole
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "edit"}, &edit)).To(Succeed())
		g.Expect(slices.ContainsFunc(edit.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "wakerequests") })).To(BeTrue())
	}, timeout, poll).Should(Succeed())

	r := &release{name: testenv.RandomName("tenant"), prefix: testenv.RandomName("team") + "-"}
	r.a, r.b = r.prefix+"a", r.prefix+"b"
	for _, ns := range []string{r.a, r.b} {
		createProject(g, ns)
		t.Cleanup(func() { _ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	}
	scaler := &scalingv1alpha1.NSScaler{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: scalingv1alpha1.NSScalerSpec{NamespacePrefix: r.prefix, Kinds: []scalingv1alpha1.WorkloadKind{{Kind: "Deployment"}, {Kind: "StatefulSet"}},
			SelfService: &scalingv1alpha1.SelfService{Enabled: true, MaxDuration: &metav1.Duration{Duration: 2 * time.Hour}, MaxPerDay: 3}},
	}
	g.Expect(k8s.Create(ctx, scaler)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, scaler) })
	g.Eventually(func(g Gomega) { expectParked(g, r.name, r.a); expectParked(g, r.name, r.b) }, timeout, poll).Should(Succeed())

	user := testenv.RandomName("alice")
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: "team-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	})).To(Succeed())
	cfg := rest.CopyConfig(kc.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	tenant, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	// The tenant may not wake by editing the NSScaler...
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"wake":[{"namespace":"`+r.a+`","until":"2099-01-01T00:00:00Z"}]}}`))
	g.Expect(apierrors.IsForbidden(tenant.Patch(ctx, &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: r.name}}, patch))).To(BeTrue())
	// ...nor ask in b...
	other := &scalingv1alpha1.WakeRequest{ObjectMeta: metav1.ObjectMeta{Namespace: r.b, Name: "sneaky"},
		Spec: scalingv1alpha1.WakeRequestSpec{Duration: &metav1.Duration{Duration: time.Hour}}}
	g.Expect(apierrors.IsForbidden(tenant.Create(ctx, other))).To(BeTrue())
	// ...but asks in a. The RoleBinding may take a moment to reach the
	// authorizer's cache.
	wr := &scalingv1alpha1.WakeRequest{ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: "tonight"},
		Spec: scalingv1alpha1.WakeRequestSpec{Duration: &metav1.Duration{Duration: time.Hour}}}
	g.Eventually(func() error { return tenant.Create(ctx, wr) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var got scalingv1alpha1.WakeRequest
		g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(wr), &got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(scalingv1alpha1.WakeRequestGranted))
		g.Expect(got.Status.NSScaler).To(Equal(r.name))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { expectRunning(g, r.a) }, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) { expectParked(g, r.name, r.b) }, 3*time.Second, poll).Should(Succeed())

	// Deleting the request ends the wake.
	g.Expect(tenant.Delete(ctx, wr)).To(Succeed())
	g.Eventually(func(g Gomega) { expectParked(g, r.name, r.a) }, timeout, poll).Should(Succeed())
}
