package memcached

import (
	"context"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/tlsreload"
)

// renewalFixture is a Memcached with TLS (mutual, the client CA is the TLS
// Secret's ca.crt) and auth, reconciled once.
type renewalFixture struct {
	lc    *laggingCache
	r     *Reconciler
	clk   *clocktesting.FakePassiveClock
	key   client.ObjectKey
	ca    *testCA
	drain func() []string
}

func newRenewalFixture(t *testing.T, clientCA bool) *renewalFixture {
	t.Helper()
	key := client.ObjectKey{Namespace: "shop", Name: "sessions"}
	spec := cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "cert"}, Auth: &cachev1alpha1.AuthSpec{SecretName: "users"}}
	if clientCA {
		spec.TLS.ClientCA = &cachev1alpha1.SecretKeySelector{Name: "cert"}
	}
	f := &renewalFixture{key: key, ca: newTestCA(t, "CA one")}
	f.lc = newLaggingCache(t,
		&cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1", Generation: 1}, Spec: spec},
		tlsSecret(t, "cert", f.ca), authSecret("users", "app:pw1\n"))
	r, recorder := secretsReconciler(t, f.lc)
	f.r, f.clk = r, r.Clock.(*clocktesting.FakePassiveClock)
	f.drain = func() []string { return drain(recorder) }
	reconcileOnce(t, f.r, key)
	f.drain()
	return f
}

// renew replaces the TLS Secret's data with a new certificate of ca (and
// ca.crt = ca), one minute later, and reconciles.
func (f *renewalFixture) renew(t *testing.T, ca *testCA) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := f.lc.server.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "cert"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data = tlsSecret(t, "cert", ca).Data
	if err := f.lc.server.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	f.clk.SetTime(f.clk.Now().Add(time.Minute))
	reconcileOnce(t, f.r, f.key)
}

func (f *renewalFixture) template(t *testing.T) corev1.PodTemplateSpec {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := f.lc.server.Get(context.Background(), f.key, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template
}

func leafSerial(t *testing.T, sec *corev1.Secret) string {
	t.Helper()
	c, err := tlsreload.Leaf(sec.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return tlsreload.SerialHex(c)
}

// A renewal under the same CA leaves the pod template alone (the agent
// loads it in place) and is reported as InPlace: status, one event, the
// in_place counter; no rollout is counted.
func TestRenewalUnderSameCAIsInPlace(t *testing.T) {
	f := newRenewalFixture(t, true)
	before := f.template(t)
	first := f.lc.memcached(t, f.key).Status.TLSCertificate
	if first == nil || first.SerialNumber == "" || first.LastRenewal != nil || first.Issuer != "CN=CA one" {
		t.Fatalf("status.tlsCertificate after the first reconcile = %+v", first)
	}
	f.renew(t, f.ca)
	after := f.template(t)
	if after.Annotations[AnnotationSecretHash] != before.Annotations[AnnotationSecretHash] || after.Annotations[AnnotationConfigHash] != before.Annotations[AnnotationConfigHash] {
		t.Fatalf("a renewal under the same CA changed the pod template's hashes: %v -> %v", before.Annotations, after.Annotations)
	}
	got := f.lc.memcached(t, f.key).Status.TLSCertificate
	sec := &corev1.Secret{}
	_ = f.lc.server.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "cert"}, sec)
	if got.SerialNumber != leafSerial(t, sec) || got.SerialNumber == first.SerialNumber || got.LastRenewal == nil ||
		got.LastRenewal.Mode != cachev1alpha1.RenewalInPlace || got.LastRenewal.PreviousSerialNumber != first.SerialNumber ||
		!got.LastRenewal.Time.Time.Equal(f.clk.Now().Truncate(time.Second)) {
		t.Fatalf("status.tlsCertificate = %+v (lastRenewal %+v), want the new serial renewed InPlace at %v", got, got.LastRenewal, f.clk.Now())
	}
	events := f.drain()
	if n := countEvents(events, cachev1alpha1.EventCertificateRenewed, "in place"); n != 1 || countEvents(events, cachev1alpha1.EventSecretRotated, "") != 0 {
		t.Fatalf("events %q: want one CertificateRenewed in place and no SecretRotated", events)
	}
	if v := counterValue(t, f.r.Metrics.renewals.WithLabelValues(renewalInPlace)); v != 1 {
		t.Fatalf("in_place renewals = %v", v)
	}
	if v := counterValue(t, f.r.Metrics.rollouts.WithLabelValues(rolloutSecret)); v != 0 {
		t.Fatalf("secret rollouts = %v, want 0", v)
	}
	// Level-triggered: another reconcile reports nothing again.
	reconcileOnce(t, f.r, f.key)
	if events := f.drain(); countEvents(events, cachev1alpha1.EventCertificateRenewed, "") != 0 {
		t.Fatalf("a second reconcile re-reported the renewal: %q", events)
	}
}

// A new CA (new issuer and new client CA) changes the Secret hash: the
// instances roll, and the renewal is reported as Rolled.
func TestCAChangeRolls(t *testing.T) {
	for _, clientCA := range []bool{true, false} {
		f := newRenewalFixture(t, clientCA)
		before := f.template(t)
		f.renew(t, newTestCA(t, "CA two"))
		after := f.template(t)
		if after.Annotations[AnnotationSecretHash] == before.Annotations[AnnotationSecretHash] {
			t.Fatalf("clientCA %v: a CA change left the Secret hash alone", clientCA)
		}
		got := f.lc.memcached(t, f.key).Status.TLSCertificate
		if got.LastRenewal == nil || got.LastRenewal.Mode != cachev1alpha1.RenewalRolled || got.Issuer != "CN=CA two" {
			t.Fatalf("clientCA %v: status.tlsCertificate = %+v", clientCA, got)
		}
		events := f.drain()
		if countEvents(events, cachev1alpha1.EventCertificateRenewed, "replaced one at a time") != 1 || countEvents(events, cachev1alpha1.EventSecretRotated, "") != 1 {
			t.Fatalf("clientCA %v: events %q", clientCA, events)
		}
		if v := counterValue(t, f.r.Metrics.renewals.WithLabelValues(renewalRolled)); v != 1 {
			t.Fatalf("clientCA %v: rolled renewals = %v", clientCA, v)
		}
	}
}

// Hostile Secret content: a certificate whose key does not match is
// refused before anything is applied (Degraded/SecretNotUsable), the
// template and status.tlsCertificate keep the running certificate.
func TestMalformedRenewalIsRefused(t *testing.T) {
	f := newRenewalFixture(t, true)
	before, first := f.template(t), f.lc.memcached(t, f.key).Status.TLSCertificate
	sec := &corev1.Secret{}
	if err := f.lc.server.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "cert"}, sec); err != nil {
		t.Fatal(err)
	}
	_, otherKey := f.ca.issue(t, testServerName, x509.ExtKeyUsageServerAuth)
	sec.Data[corev1.TLSPrivateKeyKey] = otherKey
	if err := f.lc.server.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, f.r, f.key)
	mc := f.lc.memcached(t, f.key)
	if c := findCondition(mc, cachev1alpha1.ConditionDegraded); c == nil || c.Reason != cachev1alpha1.ReasonSecretNotUsable {
		t.Fatalf("Degraded = %+v", c)
	}
	if got := mc.Status.TLSCertificate; got == nil || got.SerialNumber != first.SerialNumber || got.LastRenewal != nil {
		t.Fatalf("status.tlsCertificate = %+v, want the running %s", got, first.SerialNumber)
	}
	if after := f.template(t); after.Annotations[AnnotationSecretHash] != before.Annotations[AnnotationSecretHash] {
		t.Fatal("a refused Secret changed the template")
	}
}

// The agent beside memcached: restricted, no port, the TLS and auth files
// only, read-only; its name is reserved for the controller.
func TestTLSAgentContainer(t *testing.T) {
	f := newRenewalFixture(t, true)
	tmpl := f.template(t)
	i := slices.IndexFunc(tmpl.Spec.Containers, func(c corev1.Container) bool { return c.Name == containerTLSAgent })
	if i < 0 {
		t.Fatalf("no %s container: %+v", containerTLSAgent, tmpl.Spec.Containers)
	}
	c := tmpl.Spec.Containers[i]
	sc := c.SecurityContext
	if c.Image != DefaultTLSAgentImage || len(c.Ports) != 0 || sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!*sc.RunAsNonRoot || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Fatalf("agent container = %+v", c)
	}
	if *tmpl.Spec.AutomountServiceAccountToken {
		t.Fatal("the pod mounts a token")
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Fatalf("writable mount %+v", m)
		}
		mounts = append(mounts, m.Name)
	}
	if !slices.Equal(mounts, []string{tlsVolumeName, authVolumeName}) {
		t.Fatalf("agent mounts %v", mounts)
	}
	if want := []string{"-tls-dir=/etc/memcached/tls", "-memcached=127.0.0.1:11211", "-mutual-tls", "-auth-file=/etc/memcached/auth/authfile"}; !slices.Equal(c.Args, want) {
		t.Fatalf("agent args %q, want %q", c.Args, want)
	}
	spec := f.lc.memcached(t, f.key).Spec
	spec.Sidecars = []cachev1alpha1.ExtraContainer{{Name: containerTLSAgent, Image: "evil"}}
	if err := checkSecurityOverrides(&spec.PodOverrides); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("a sidecar named %s: %v", containerTLSAgent, err)
	}
}

func countEvents(events []string, reason, contains string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") && strings.Contains(e, contains) {
			n++
		}
	}
	return n
}

func findCondition(mc *cachev1alpha1.Memcached, typ string) *metav1.Condition {
	for i := range mc.Status.Conditions {
		if mc.Status.Conditions[i].Type == typ {
			return &mc.Status.Conditions[i]
		}
	}
	return nil
}
