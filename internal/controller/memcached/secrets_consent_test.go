package memcached

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// TestSecretConsentReadAtEachReconcile: the TLS and auth Secrets are read
// live, label included, at every reconcile (at least every SecretResync).
// Once the label is gone the Memcached is Degraded/SecretNotUsable and the
// Secret's new data is not read into the pod template; labelled again, it
// is.
func TestSecretConsentReadAtEachReconcile(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "real"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretName: "auth"}},
	})
	ctx := context.Background()
	sec := authSecret("auth", "user:one\n")
	if err := lc.server.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	r, _ := secretsReconciler(t, lc)
	if res := reconcileOnce(t, r, key); res.RequeueAfter != DefaultSecretResync {
		t.Fatalf("requeue after %v, want the resync %v", res.RequeueAfter, DefaultSecretResync)
	}
	hash := func() string {
		dep := &appsv1.Deployment{}
		if err := lc.server.Get(ctx, key, dep); err != nil {
			t.Fatal(err)
		}
		return dep.Spec.Template.Annotations[AnnotationSecretHash]
	}
	before := hash()
	update := func(change func(*corev1.Secret)) {
		var s corev1.Secret
		if err := lc.server.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "auth"}, &s); err != nil {
			t.Fatal(err)
		}
		change(&s)
		if err := lc.server.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *corev1.Secret) {
		s.Labels = nil
		s.Data[cachev1alpha1.AuthFileKey] = []byte("user:two\n")
	})
	if res := reconcileOnce(t, r, key); res.RequeueAfter != DefaultSecretRecheck {
		t.Fatalf("requeue after %v, want the recheck %v", res.RequeueAfter, DefaultSecretRecheck)
	}
	degraded := meta.FindStatusCondition(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != cachev1alpha1.ReasonSecretNotUsable {
		t.Fatalf("Degraded = %+v after the label was removed", degraded)
	}
	if hash() != before {
		t.Fatal("the data of a Secret without consent reached the pod template")
	}
	update(func(s *corev1.Secret) { s.Labels = map[string]string{cachev1alpha1.UsableLabel: "true"} })
	reconcileOnce(t, r, key)
	if hash() == before {
		t.Fatal("labelled again, the renewed Secret was not used")
	}
}
