package probe

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func TestWatchProber(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "cfg"}, Data: map[string]string{"a": "1", "b": "2"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "sec", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"token": []byte("x")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm, sec).Build()
	keys := testKeys(t)

	all := newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "cfg"})
	onlyA := newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "cfg", Keys: []string{"a"}})
	secret := newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "sec"})
	a0, k0, s0 := all.Probe(ctx), onlyA.Probe(ctx), secret.Probe(ctx)
	for _, o := range []Observation{a0, k0, s0} {
		if o.Result != ok || o.Fingerprint == "" {
			t.Fatalf("first read: %+v", o)
		}
	}
	cm.Data["b"] = "3"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if o := all.Probe(ctx); o.Fingerprint == a0.Fingerprint {
		t.Fatal("change of key b not seen")
	}
	if o := onlyA.Probe(ctx); o.Fingerprint != k0.Fingerprint {
		t.Fatal("change of key b seen by a watch limited to key a")
	}
	// Metadata changes do not count.
	cm.Labels = map[string]string{"x": "y"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if o := onlyA.Probe(ctx); o.Fingerprint != k0.Fingerprint {
		t.Fatal("a label change counted as a data change")
	}
	sec.Data["token"] = []byte("y")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if o := secret.Probe(ctx); o.Fingerprint == s0.Fingerprint {
		t.Fatal("secret change not seen")
	}
	// Another namespace's object is never read.
	other := newWatchProber(c, keys, "other", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "cfg"})
	if o := other.Probe(ctx); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonWatchedNotFound {
		t.Fatalf("other namespace: %+v", o)
	}
}

func TestWatchedSecretMustOptIn(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "admin-token"}, Data: map[string][]byte{"t": []byte("x")}}
	wrongValue := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "maybe",
		Labels: map[string]string{autorebootv1alpha1.UsableLabel: "yes"}}, Data: map[string][]byte{"t": []byte("x")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(unlabelled, wrongValue).Build()
	keys := testKeys(t)
	watch := func(name string) Observation {
		return newWatchProber(c, keys, "app", autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: name}).Probe(ctx)
	}
	got := map[string]Observation{"admin-token": watch("admin-token"), "maybe": watch("maybe"), "missing": watch("missing")}
	for name, o := range got {
		if o.Result != errR || o.Reason != autorebootv1alpha1.ReasonSecretNotUsable || o.Fingerprint != "" {
			t.Errorf("%s: %+v", name, o)
		}
		if !strings.Contains(o.Message, autorebootv1alpha1.UsableLabel+"=true") {
			t.Errorf("%s: the message does not say which label to add: %q", name, o.Message)
		}
	}
	// Missing and unlabelled read the same, but for the name: a policy
	// author learns nothing about which Secrets exist.
	if strings.ReplaceAll(got["admin-token"].Message, "admin-token", "X") != strings.ReplaceAll(got["missing"].Message, "missing", "X") {
		t.Errorf("a missing Secret reads differently from an unlabelled one: %q vs %q", got["admin-token"].Message, got["missing"].Message)
	}
	unlabelled.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
	if err := c.Update(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	if o := watch("admin-token"); o.Result != ok || o.Fingerprint == "" {
		t.Fatalf("after labelling: %+v", o)
	}
}
