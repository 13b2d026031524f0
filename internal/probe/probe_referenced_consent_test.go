package probe

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestReferencedSecretConsentReadEachPeriod: a referenced Secret's label
// is read with its metadata at each poll. Once it is gone, the Secret's
// data is no longer read (even when it changes) and the trigger reports
// SecretNotUsable without firing; labelled again it is tracked from a new
// baseline, again without firing.
func TestReferencedSecretConsentReadEachPeriod(t *testing.T) {
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"k": []byte("1")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "1"}}
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
		sec, cm, referencingDeployment("web", "cfg", "tls"))
	st := newTriggerState(referencedTrigger, 1, 1, PolicyState{})
	observe := func() Observation {
		fx.clock.Step(10 * time.Second) // one period
		o := fx.prober.Probe(ctx)
		st.observe(o, fx.clock.Now())
		return o
	}
	if o := observe(); o.Reason != "" {
		t.Fatalf("labelled: %+v", o)
	}
	fx.update(t, sec, func() { sec.Labels = nil })
	if o := observe(); o.Reason != autorebootv1alpha1.ReasonSecretNotUsable {
		t.Fatalf("after the label was removed: %+v", o)
	}
	fx.update(t, sec, func() { sec.Data["k"] = []byte("2") })
	reads := fx.gets["tls"] // the update's own GET counts too
	observe()
	if fx.gets["tls"] != reads {
		t.Fatal("the data of a Secret without consent was read")
	}
	fx.update(t, sec, func() { sec.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"} })
	if o := observe(); o.Reason != "" {
		t.Fatalf("labelled again: %+v", o)
	}
	observe()
	if st.published.FireSeq != 0 {
		t.Fatalf("fired %d times while consent came and went", st.published.FireSeq)
	}
}
