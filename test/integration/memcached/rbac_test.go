package memcached

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// TestManagerIdentityIsLimitedToTheGeneratedRole is the control for the
// suite's RBAC set-up: the identity the manager runs as may do what the
// controller needs and is refused the rest, so every other test passing
// proves the +kubebuilder:rbac markers are sufficient.
func TestManagerIdentityIsLimitedToTheGeneratedRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	var list cachev1alpha1.MemcachedList
	g.Expect(env.managerClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nope"}}
	err := env.managerClient.Create(ctx, secret)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a Secret must be forbidden, got %v", err)

	mc := newMemcached(ns, "nodelete", cachev1alpha1.MemcachedSpec{})
	create(t, mc)
	err = env.managerClient.Delete(ctx, mc)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the controller never deletes a Memcached, got %v", err)
}
