package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// referencingDeployment references cm's key "used" by env, and sec by a
// volume.
func referencingDeployment(name, cm, sec string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1,
		Labels: map[string]string{"tier": "web"}}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Env: []corev1.EnvVar{cmKeyEnv(cm, "used", nil)}}}
	if sec != "" {
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: sec}}}}
	}
	return d
}

type refFixture struct {
	c      client.Client
	prober *referencedProber
	gets   map[string]int
	clock  *clocktesting.FakeClock
}

func newRefFixture(t *testing.T, target autorebootv1alpha1.TargetRef, settings ReferencedSettings, objs ...client.Object) *refFixture {
	t.Helper()
	fx := &refFixture{gets: map[string]int{}, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	fx.c = fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *corev1.ConfigMap, *corev1.Secret:
				fx.gets[key.Name]++ // data reads, not metadata
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	f := testProbers(t, fx.c, Settings{Referenced: settings})
	f.clock = fx.clock
	spec := Spec{Policy: types.NamespacedName{Namespace: "ns", Name: "rbp"}, Name: "refs", Target: target,
		Trigger: autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 10}}}
	fx.prober = newReferencedProber(f, spec)
	t.Cleanup(fx.prober.Close)
	return fx
}

func (fx *refFixture) update(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	if err := fx.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	change()
	if err := fx.c.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func targetFP(t *testing.T, o Observation, name string) string {
	t.Helper()
	if o.Result != ok {
		t.Fatalf("Observation %+v", o)
	}
	for _, to := range o.Targets {
		if to.Name == name {
			return to.Fingerprint
		}
	}
	t.Fatalf("no target %s in %+v", name, o.Targets)
	return ""
}

func TestReferencedProberFingerprintsOnlyWhatIsReferenced(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "1", "other": "x"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"tls.key": []byte("k")}}
	dep := referencingDeployment("web", "cfg", "tls")
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{}, cm, sec, dep)
	o0 := fx.prober.Probe(ctx)
	fp0 := targetFP(t, o0, "web")
	if !strings.Contains(o0.Message, "tracking 2 references") || o0.Reason != "" {
		t.Fatalf("message %q reason %q", o0.Message, o0.Reason)
	}

	fx.update(t, cm, func() { cm.Data["other"] = "y" })
	if fp := targetFP(t, fx.prober.Probe(ctx), "web"); fp != fp0 {
		t.Fatal("a change of a key the template does not reference changed the fingerprint")
	}
	fx.update(t, cm, func() { cm.Data["used"] = "2" })
	fp1 := targetFP(t, fx.prober.Probe(ctx), "web")
	if fp1 == fp0 {
		t.Fatal("a change of the referenced key was not seen")
	}
	fx.update(t, sec, func() { sec.Data["tls.key"] = []byte("k2") })
	if fp := targetFP(t, fx.prober.Probe(ctx), "web"); fp == fp1 {
		t.Fatal("a change of the volume's Secret was not seen")
	}

	// An unchanged version is not read again.
	reads := fx.gets["cfg"]
	fx.prober.Probe(ctx)
	if fx.gets["cfg"] != reads {
		t.Fatalf("an unchanged ConfigMap was read again (%d → %d GETs)", reads, fx.gets["cfg"])
	}
}

func TestReferencedProberFollowsTheTemplate(t *testing.T) {
	ctx := context.Background()
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"used": "1"}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Data: map[string]string{"k": "1"}}
	dep := referencingDeployment("web", "a", "")
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{}, a, b, dep)
	before := fx.prober.Probe(ctx).Targets[0]
	fx.update(t, dep, func() {
		dep.Generation++ // the fake client does not count generations
		dep.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}}}}
	})
	after := fx.prober.Probe(ctx).Targets[0]
	if after.References == before.References {
		t.Fatal("a new volume reference did not change the reference set")
	}
	fx.prober.watcher.mu.Lock()
	_, tracked := fx.prober.interest[refKey{kind: cmKind, namespace: "ns", name: "b"}]
	fx.prober.watcher.mu.Unlock()
	if !tracked {
		t.Fatal("the new reference is not watched")
	}
	fx.update(t, b, func() { b.Data["k"] = "2" })
	if o := fx.prober.Probe(ctx).Targets[0]; o.Fingerprint == after.Fingerprint {
		t.Fatal("a change of the newly referenced ConfigMap was not seen")
	}
}

func TestReferencedProberHostileInputs(t *testing.T) {
	ctx := context.Background()
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"pw": []byte("hunter2")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "1"}}

	t.Run("a Secret without the label is not read, and looks like a missing one", func(t *testing.T) {
		missing := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
			cm.DeepCopy(), referencingDeployment("web", "cfg", "db"))
		fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
			cm.DeepCopy(), unlabelled.DeepCopy(), referencingDeployment("web", "cfg", "db"))
		o, m := fx.prober.Probe(ctx), missing.prober.Probe(ctx)
		if o.Reason != autorebootv1alpha1.ReasonSecretNotUsable || o.Message != m.Message || o.Reason != m.Reason {
			t.Fatalf("unlabelled: %q/%q, missing: %q/%q", o.Reason, o.Message, m.Reason, m.Message)
		}
		if fx.gets["db"] != 0 {
			t.Fatal("the data of an unlabelled Secret was read")
		}
		fp := targetFP(t, o, "web")
		fx.update(t, unlabelled, func() { unlabelled.Data["pw"] = []byte("changed") })
		if targetFP(t, fx.prober.Probe(ctx), "web") != fp {
			t.Fatal("a change of an unlabelled Secret was seen")
		}
	})

	t.Run("the admin may let unlabelled Secrets count", func(t *testing.T) {
		fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			ReferencedSettings{SecretsWithoutLabel: true}, cm.DeepCopy(), unlabelled.DeepCopy(), referencingDeployment("web", "cfg", "db"))
		if o := fx.prober.Probe(ctx); o.Reason != "" || !strings.Contains(o.Message, "tracking 2") {
			t.Fatalf("%+v", o)
		}
	})

	t.Run("an enormous number of references is refused, not read", func(t *testing.T) {
		dep := referencingDeployment("web", "cfg", "")
		for i := range 1000 {
			dep.Spec.Template.Spec.Containers[0].Env = append(dep.Spec.Template.Spec.Containers[0].Env, cmKeyEnv(fmt.Sprintf("cm-%d", i), "k", nil))
		}
		fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{}, dep)
		o := fx.prober.Probe(ctx)
		if o.Result != autorebootv1alpha1.ResultError || o.Reason != autorebootv1alpha1.ReasonTooManyReferences {
			t.Fatalf("%+v", o)
		}
		if len(fx.gets) != 0 {
			t.Fatalf("%d objects read before refusing", len(fx.gets))
		}
	})

	t.Run("too many objects over all targets", func(t *testing.T) {
		var objs []client.Object
		for i := range 5 {
			objs = append(objs, referencingDeployment(fmt.Sprintf("web-%d", i), fmt.Sprintf("cm-%d", i), ""))
		}
		sel := &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"tier": "web"}}
		fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Selector: sel},
			ReferencedSettings{MaxPerPolicy: 4}, objs...)
		if o := fx.prober.Probe(ctx); o.Reason != autorebootv1alpha1.ReasonTooManyReferences {
			t.Fatalf("%+v", o)
		}
		fx2 := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Selector: sel},
			ReferencedSettings{MaxTargets: 4}, objs...)
		if o := fx2.prober.Probe(ctx); o.Reason != autorebootv1alpha1.ReasonTooManyReferences {
			t.Fatalf("%+v", o)
		}
	})

	t.Run("a missing ConfigMap is a note, its creation a change", func(t *testing.T) {
		fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
			referencingDeployment("web", "later", ""))
		o := fx.prober.Probe(ctx)
		if o.Result != ok || o.Reason != autorebootv1alpha1.ReasonReferenceNotFound || !strings.Contains(o.Message, "ConfigMap later") {
			t.Fatalf("%+v", o)
		}
		fp := targetFP(t, o, "web")
		if err := fx.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "later"}, Data: map[string]string{"used": "1"}}); err != nil {
			t.Fatal(err)
		}
		if targetFP(t, fx.prober.Probe(ctx), "web") == fp {
			t.Fatal("the creation of a missing reference was not seen")
		}
	})
}

func TestReferencedProberPollsUnwatchedObjectsOnlyWhenDue(t *testing.T) {
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		Data: map[string][]byte{"k": []byte("1")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"used": "1"}}
	fx := newRefFixture(t, autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "web"}, ReferencedSettings{},
		sec, cm, referencingDeployment("web", "cfg", "tls"))
	fp := targetFP(t, fx.prober.Probe(ctx), "web")
	fx.update(t, sec, func() { sec.Data["k"] = []byte("2") })
	// A wake-up (some other object changed) reads no Secret before its period.
	if got := targetFP(t, fx.prober.ProbeWoken(ctx), "web"); got != fp {
		t.Fatal("a woken prober polled a Secret before its period")
	}
	fx.clock.Step(10 * time.Second)
	if got := targetFP(t, fx.prober.ProbeWoken(ctx), "web"); got == fp {
		t.Fatal("a Secret due for polling was not read")
	}
}

func TestObserveReferenced(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := testKeyFor(t)
	fp := func(s string) string { return k.FormatHex(s) }
	st := newTriggerState(referencedTrigger, 1, 1, PolicyState{TriggerHash: "h"})
	obs := func(targets ...TargetObservation) Observation {
		return Observation{Result: ok, Targets: targets, Message: "m"}
	}
	if !st.observe(obs(TargetObservation{Name: "a", References: "r1", Fingerprint: fp("01")}, TargetObservation{Name: "b", References: "r1", Fingerprint: fp("02")}), now) || st.published.FireSeq != 0 {
		t.Fatalf("first Observation: a baseline, no fire: %+v", st.published)
	}
	if st.observe(obs(TargetObservation{Name: "a", References: "r1", Fingerprint: fp("01")}, TargetObservation{Name: "b", References: "r1", Fingerprint: fp("02")}), now) {
		t.Fatal("an unchanged Observation published something")
	}
	if !st.observe(obs(TargetObservation{Name: "a", References: "r1", Fingerprint: fp("11")}, TargetObservation{Name: "b", References: "r1", Fingerprint: fp("02")}), now) ||
		st.published.FireSeq != 1 || st.published.Targets["a"].FireSeq != 1 || st.published.Targets["b"].FireSeq != 0 {
		t.Fatalf("a's change fires for a only: %+v", st.published)
	}
	// b's template references something else now: a new baseline.
	if !st.observe(obs(TargetObservation{Name: "a", References: "r1", Fingerprint: fp("11")}, TargetObservation{Name: "b", References: "r2", Fingerprint: fp("99")}), now) ||
		st.published.FireSeq != 1 {
		t.Fatalf("a new reference set fired: %+v", st.published)
	}
	// b is gone.
	if !st.observe(obs(TargetObservation{Name: "a", References: "r1", Fingerprint: fp("11")}), now) || len(st.published.Targets) != 1 {
		t.Fatalf("a removed target stayed: %+v", st.published)
	}
	// An error keeps the baselines.
	st.observe(Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError}, now)
	if st.published.Targets["a"].Fingerprint != fp("11") {
		t.Fatal("an error dropped a baseline")
	}
}

func testKeyFor(t *testing.T) *fingerprint.Key {
	t.Helper()
	k, err := testKeys(t).Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
