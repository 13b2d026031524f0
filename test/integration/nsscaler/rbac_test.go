package nsscaler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// asManagerRole returns a config for a user bound to the manager's
// generated ClusterRole (config/rbac/role.yaml) and nothing else: what the
// manager's ServiceAccount may do.
func asManagerRole(t *testing.T) *envtest.AuthenticatedUser {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	g.Expect(yaml.Unmarshal(raw, &role)).To(Succeed())
	name := testenv.RandomName("nsscaler-manager-role")
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	g.Expect(k8s.Create(ctx, &role)).To(Succeed())
	user := testenv.RandomName("nsscaler-sa")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, &role)
	})
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	return u
}

// TestUnlistableKindFreezesNothing runs the manager with the rights of its
// ServiceAccount only, and an NSScaler listing Gizmos, a custom kind with a
// scale subresource those rights do not cover: the Gizmo cache never syncs.
// Gizmos are reported KindUnavailable, the NSScaler's Deployments are
// parked all the same, and another NSScaler created afterwards works too.
func TestUnlistableKindFreezesNothing(t *testing.T) {
	user := asManagerRole(t)
	startManager(t, managerOptions{config: user.Config()})
	g := NewWithT(t)
	p, ns, name := oneNamespace(t, "nogizmo")
	createDeployment(t, ns, "web", ptr.To[int32](2))
	createScaler(t, name, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p, Kinds: []scalingv1alpha1.WorkloadKind{
		{Kind: "Deployment"}, {Group: "test.runbook.dev", Kind: "Gizmo"},
	}})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(name, 2)}))
		s := getScaler(g, name)
		st, reason := conditionReason(s, scalingv1alpha1.ConditionDegraded)
		g.Expect([]any{st, reason}).To(Equal([]any{metav1.ConditionTrue, scalingv1alpha1.ReasonKindUnavailable}))
		msg := conditionMessage(s, scalingv1alpha1.ConditionDegraded)
		g.Expect(strings.Contains(msg, "Gizmo.test.runbook.dev")).To(BeTrue(), msg)
	}, timeout, poll).Should(Succeed())

	p2, ns2, other := oneNamespace(t, "nogizmo-other")
	createDeployment(t, ns2, "web", ptr.To[int32](3))
	createScaler(t, other, scalingv1alpha1.NSScalerSpec{NamespacePrefix: p2})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns2, "web")).To(Equal(state{Replicas: 0, Annotation: parkedBy(other, 3)}))
	}, timeout, poll).Should(Succeed())
	// Whitelisting still restores at once: nothing waits on the Gizmos.
	updateScaler(t, name, func(s *scalingv1alpha1.NSScalerSpec) { s.Whitelist = []string{ns} })
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentState(g, ns, "web")).To(Equal(state{Replicas: 2}))
	}, timeout, poll).Should(Succeed())
}
