package memcached

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// secretsReconciler is what Setup builds for a Memcached with Secrets, on
// the lagging cache, with metrics and a recorder.
func secretsReconciler(t *testing.T, lc *laggingCache) (*Reconciler, *events.FakeRecorder) {
	t.Helper()
	recorder := events.NewFakeRecorder(20)
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), recorder)
	r.APIReader, r.Keys, r.Metrics = lc.server, fingerprint.StaticSource(testKey(t)), NewMetrics()
	r.SecretResync, r.SecretRecheck = DefaultSecretResync, DefaultSecretRecheck
	return r, recorder
}

func drain(recorder *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A missing TLS Secret: Degraded/SecretNotUsable with one Warning, nothing
// applied, looked at again after SecretRecheck; created later, the
// Memcached recovers and its Secrets are then read every SecretResync.
func TestMissingSecretDegradesThenRecovers(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "real"}
	lc := newLaggingCache(t, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}},
	})
	r, recorder := secretsReconciler(t, lc)
	for range 2 {
		if res := reconcileOnce(t, r, key); res.RequeueAfter != DefaultSecretRecheck {
			t.Fatalf("requeue after %v, want %v", res.RequeueAfter, DefaultSecretRecheck)
		}
	}
	degraded := meta.FindStatusCondition(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionDegraded)
	if degraded.Reason != cachev1alpha1.ReasonSecretNotUsable || !strings.Contains(degraded.Message, "kubectl label secret cert "+cachev1alpha1.UsableLabel+"=true") {
		t.Fatalf("Degraded = %s: %s", degraded.Reason, degraded.Message)
	}
	if err := lc.server.Get(context.Background(), key, &appsv1.Deployment{}); err == nil {
		t.Fatal("a Deployment was applied although its Secret is missing")
	}
	warnings := 0
	for _, e := range drain(recorder) {
		if strings.HasPrefix(e, corev1.EventTypeWarning+" "+cachev1alpha1.EventSecretNotUsable) {
			warnings++
		}
	}
	if warnings != 1 || counterValue(t, r.Metrics.degraded.WithLabelValues(cachev1alpha1.ReasonSecretNotUsable)) != 1 {
		t.Errorf("%d warnings, degraded counter %v: want one of each, on the transition",
			warnings, counterValue(t, r.Metrics.degraded.WithLabelValues(cachev1alpha1.ReasonSecretNotUsable)))
	}

	if err := lc.server.Create(context.Background(), tlsSecret(t, "cert", newTestCA(t, "CA"))); err != nil {
		t.Fatal(err)
	}
	if res := reconcileOnce(t, r, key); res.RequeueAfter != DefaultSecretResync {
		t.Errorf("requeue after %v, want the resync %v", res.RequeueAfter, DefaultSecretResync)
	}
	degraded = meta.FindStatusCondition(lc.memcached(t, key).Status.Conditions, cachev1alpha1.ConditionDegraded)
	if degraded.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %s/%s after the Secret was created", degraded.Status, degraded.Reason)
	}
	dep := &appsv1.Deployment{}
	if err := lc.server.Get(context.Background(), key, dep); err != nil {
		t.Fatalf("no Deployment after the Secret was created: %v", err)
	}
	if dep.Spec.Template.Annotations[AnnotationSecretHash] == "" {
		t.Error("the pod template has no Secret fingerprint")
	}
}

// A new CA changes only the Secret fingerprint of the pod template: one
// SecretRotated event, one rollout counted as a Secret rollout. Nothing
// changes when the Secret's labels do.
func TestSecretRenewalRollsTheInstances(t *testing.T) {
	key := client.ObjectKey{Namespace: "shop", Name: "real"}
	cert := tlsSecret(t, "cert", newTestCA(t, "CA 1"))
	lc := newLaggingCache(t, cert, &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}},
	})
	r, recorder := secretsReconciler(t, lc)
	reconcileOnce(t, r, key)
	before := &appsv1.Deployment{}
	if err := lc.server.Get(context.Background(), key, before); err != nil {
		t.Fatal(err)
	}
	drain(recorder)

	cert.Labels["unrelated"] = "label"
	if err := lc.server.Update(context.Background(), cert); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, key)
	for _, e := range drain(recorder) {
		// (The fake client's apply leaves an empty status in the owned
		// fields, so it reports drift; the apiserver does not, see
		// TestNoWritesWhenNothingChanged.)
		if strings.Contains(e, cachev1alpha1.EventSecretRotated) || strings.Contains(e, cachev1alpha1.EventConfigRollout) {
			t.Errorf("a label change of the Secret rolled the instances: %q", e)
		}
	}

	cert.Data = tlsSecret(t, "cert", newTestCA(t, "CA 2")).Data
	if err := lc.server.Update(context.Background(), cert); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, key)
	after := &appsv1.Deployment{}
	if err := lc.server.Get(context.Background(), key, after); err != nil {
		t.Fatal(err)
	}
	b, a := before.Spec.Template.Annotations, after.Spec.Template.Annotations
	if a[AnnotationSecretHash] == b[AnnotationSecretHash] || a[AnnotationConfigHash] != b[AnnotationConfigHash] {
		t.Errorf("annotations %v -> %v: want only the Secret fingerprint changed", b, a)
	}
	// A new CA: a change of trust, rolled (tls_renewal.go), and reported
	// as a renewal too.
	evs := drain(recorder)
	if len(evs) != 2 || countEvents(evs, cachev1alpha1.EventSecretRotated, "") != 1 || countEvents(evs, cachev1alpha1.EventCertificateRenewed, "replaced one at a time") != 1 {
		t.Errorf("events %q, want one %s and one %s", evs, cachev1alpha1.EventSecretRotated, cachev1alpha1.EventCertificateRenewed)
	}
	if counterValue(t, r.Metrics.rollouts.WithLabelValues(rolloutConfig)) != 0 {
		t.Error("the renewal was counted as a configuration rollout")
	}
	if n := counterValue(t, r.Metrics.rollouts.WithLabelValues(rolloutSecret)); n != 1 {
		t.Errorf("secret rollouts counted %v, want 1", n)
	}
}

// counterValue reads c through a registry, as a scrape would.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gathering: %v, %v", families, err)
	}
	return families[0].GetMetric()[0].GetCounter().GetValue()
}
