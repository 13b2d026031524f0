package reloadercompat

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/reloadercompat"
)

// object is a ConfigMap or Secret of an example.
type object struct {
	secret      bool
	name        string
	annotations map[string]string
	// unlabelled: a Secret without autoreboot.runbook.dev/usable.
	unlabelled bool
}

type ref struct {
	secret bool
	name   string
	// how: env (one key), envFrom, volume, projected.
	how string
}

// example is one of Reloader's documented annotation examples: the
// workload, the objects, changes after which Reloader does not restart
// the workload (quiet) and the one after which it does (fire, "" when it
// never restarts).
type example struct {
	name        string
	kind        autorebootv1alpha1.TargetKind
	annotations map[string]string
	template    map[string]string
	objects     []object
	refs        []ref
	quiet       []string
	fire        string
}

const (
	auto   = reloadercompat.AnnotationAuto
	search = reloadercompat.AnnotationSearch
	match  = reloadercompat.AnnotationMatch
	ignore = reloadercompat.AnnotationIgnore
)

var examples = []example{{
	name: "auto: envFrom ConfigMap and Secret (README quick start), the ConfigMap", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{auto: "true"},
	objects:     []object{{name: "my-config"}, {secret: true, name: "my-secret"}, {name: "unused"}},
	refs:        []ref{{name: "my-config", how: "envFrom"}, {secret: true, name: "my-secret", how: "envFrom"}},
	quiet:       []string{"ConfigMap/unused"}, fire: "ConfigMap/my-config",
}, {
	name: "auto: the Secret", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{auto: "true"},
	objects:     []object{{name: "my-config"}, {secret: true, name: "my-secret"}},
	refs:        []ref{{name: "my-config", how: "envFrom"}, {secret: true, name: "my-secret", how: "volume"}},
	fire:        "Secret/my-secret",
}, {
	name: "auto: a key the pod does not read still counts (Reloader hashes the whole object)", kind: autorebootv1alpha1.KindStatefulSet,
	annotations: map[string]string{auto: "true"},
	objects:     []object{{name: "app"}},
	refs:        []ref{{name: "app", how: "env"}},
	fire:        "ConfigMap/app#other",
}, {
	name: "auto: projected volume, DaemonSet", kind: autorebootv1alpha1.KindDaemonSet,
	annotations: map[string]string{auto: "true"},
	objects:     []object{{name: "proj"}},
	refs:        []ref{{name: "proj", how: "projected"}},
	fire:        "ConfigMap/proj",
}, {
	name: "auto on the pod template", kind: autorebootv1alpha1.KindDeployment,
	template: map[string]string{auto: "true"},
	objects:  []object{{name: "cfg"}},
	refs:     []ref{{name: "cfg", how: "volume"}},
	fire:     "ConfigMap/cfg",
}, {
	name: "auto \"false\" disables", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{auto: "false"},
	objects:     []object{{name: "cfg"}},
	refs:        []ref{{name: "cfg", how: "envFrom"}},
	quiet:       []string{"ConfigMap/cfg"},
}, {
	name: "configmap auto: Secrets do not restart", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{reloadercompat.AnnotationConfigMapAuto: "true"},
	objects:     []object{{name: "cfg"}, {secret: true, name: "sec"}},
	refs:        []ref{{name: "cfg", how: "envFrom"}, {secret: true, name: "sec", how: "envFrom"}},
	quiet:       []string{"Secret/sec"}, fire: "ConfigMap/cfg",
}, {
	name: "secret auto: ConfigMaps do not restart", kind: autorebootv1alpha1.KindStatefulSet,
	annotations: map[string]string{reloadercompat.AnnotationSecretAuto: "true"},
	objects:     []object{{name: "cfg"}, {secret: true, name: "sec"}},
	refs:        []ref{{name: "cfg", how: "envFrom"}, {secret: true, name: "sec", how: "env"}},
	quiet:       []string{"ConfigMap/cfg"}, fire: "Secret/sec",
}, {
	name: "named ConfigMap, not referenced by the template", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{reloadercompat.AnnotationConfigMapList: "my-config"},
	objects:     []object{{name: "my-config"}, {name: "referenced"}},
	refs:        []ref{{name: "referenced", how: "envFrom"}},
	quiet:       []string{"ConfigMap/referenced"}, fire: "ConfigMap/my-config",
}, {
	name: "named list of two ConfigMaps, the second", kind: autorebootv1alpha1.KindDaemonSet,
	annotations: map[string]string{reloadercompat.AnnotationConfigMapList: "a, b"},
	objects:     []object{{name: "a"}, {name: "b"}, {name: "c"}},
	quiet:       []string{"ConfigMap/c"}, fire: "ConfigMap/b",
}, {
	name: "named Secret", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{reloadercompat.AnnotationSecretList: "my-secret"},
	objects:     []object{{secret: true, name: "my-secret"}, {name: "cfg"}},
	refs:        []ref{{name: "cfg", how: "envFrom"}},
	quiet:       []string{"ConfigMap/cfg"}, fire: "Secret/my-secret",
}, {
	name: "search + match: only the matched reference", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{search: "true"},
	objects:     []object{{name: "tagged", annotations: map[string]string{match: "true"}}, {name: "plain"}},
	refs:        []ref{{name: "tagged", how: "envFrom"}, {name: "plain", how: "volume"}},
	quiet:       []string{"ConfigMap/plain"}, fire: "ConfigMap/tagged",
}, {
	name: "match without search does nothing; auto wins over search", kind: autorebootv1alpha1.KindStatefulSet,
	annotations: map[string]string{auto: "true", search: "true"},
	objects:     []object{{name: "plain"}},
	refs:        []ref{{name: "plain", how: "envFrom"}},
	fire:        "ConfigMap/plain",
}, {
	name: "ignore on the ConfigMap", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{auto: "true"},
	objects:     []object{{name: "skipped", annotations: map[string]string{ignore: "true"}}, {name: "cfg"}},
	refs:        []ref{{name: "skipped", how: "envFrom"}, {name: "cfg", how: "envFrom"}},
	quiet:       []string{"ConfigMap/skipped"}, fire: "ConfigMap/cfg",
}, {
	name: "ignore on a named Secret", kind: autorebootv1alpha1.KindDeployment,
	annotations: map[string]string{reloadercompat.AnnotationSecretList: "s1,s2"},
	objects:     []object{{secret: true, name: "s1", annotations: map[string]string{ignore: "true"}}, {secret: true, name: "s2"}},
	quiet:       []string{"Secret/s1"}, fire: "Secret/s2",
}}

func TestReloaderDocumentedExamples(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			runExample(t, ex)
		})
	}
}

func runExample(t *testing.T, ex example) {
	g := NewWithT(t)
	ns := createNamespace(t, "compat")
	for _, o := range ex.objects {
		createObject(t, ns, o)
	}
	w := newWorkload(ex.kind, ns, "app")
	w.SetAnnotations(ex.annotations)
	tpl := templateOf(w)
	tpl.Annotations = ex.template
	addRefs(tpl, ex.refs)
	g.Expect(k8s.Create(context.Background(), w)).To(Succeed())
	markRolledOut(t, w)
	policy := "reloader-" + map[autorebootv1alpha1.TargetKind]string{
		autorebootv1alpha1.KindDeployment: "deploy", autorebootv1alpha1.KindStatefulSet: "sts", autorebootv1alpha1.KindDaemonSet: "ds"}[ex.kind] + "-app"
	if ex.fire == "" {
		// Nothing is tracked: no policy is made, and a change restarts nothing.
		g.Consistently(func() error {
			return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policy}, &autorebootv1alpha1.RebootPolicy{})
		},
			"3s", interval).ShouldNot(Succeed())
		for _, q := range ex.quiet {
			change(t, ns, q)
		}
		g.Consistently(func() string { return stamp(t, ex.kind, ns, "app") }, "3s", interval).Should(BeEmpty())
		return
	}
	waitTracked(t, ns, policy)
	for _, q := range ex.quiet {
		change(t, ns, q)
	}
	change(t, ns, ex.fire)
	g.Eventually(func() string { return stamp(t, ex.kind, ns, "app") }, timeout, interval).ShouldNot(BeEmpty())
	// Exactly once, and for the fire alone: a quiet change made before it
	// would have restarted first (or been named in the restart).
	g.Eventually(func() int64 { return getRBP(t, ns, policy).Status.RestartCount }, timeout, interval).Should(Equal(int64(1)))
	fired := firedName(ex.fire)
	g.Eventually(func() []string { return eventNotes(ns, "app", autorebootv1alpha1.EventRestarted) }, timeout, interval).Should(
		ContainElement(ContainSubstring(fired)))
	for _, n := range eventNotes(ns, "app", autorebootv1alpha1.EventRestarted) {
		for _, q := range ex.quiet {
			g.Expect(n).NotTo(ContainSubstring(firedName(q)+":"), "a quiet change is named in the restart")
		}
		g.Expect(n).NotTo(ContainSubstring("value-"), "an event shows a value")
	}
	g.Consistently(func() int64 { return getRBP(t, ns, policy).Status.RestartCount }, "2s", interval).Should(Equal(int64(1)))
}

// firedName is how the restart event names an object ("ConfigMap app").
func firedName(spec string) string {
	kind, name, _ := cut(spec, "/")
	name, _, _ = cut(name, "#")
	return kind + " " + name
}

func cut(s, sep string) (string, string, bool) {
	for i := 0; i+len(sep) <= len(s); i++ {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

func createObject(t *testing.T, ns string, o object) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: o.name, Annotations: o.annotations}
	var obj client.Object
	if o.secret {
		if !o.unlabelled {
			meta.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
		}
		obj = &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"key": "value-0", "other": "value-0"}}
	} else {
		obj = &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"key": "value-0", "other": "value-0"}}
	}
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func addRefs(tpl *corev1.PodTemplateSpec, refs []ref) {
	c := &tpl.Spec.Containers[0]
	for i, r := range refs {
		lo := corev1.LocalObjectReference{Name: r.name}
		vol := corev1.Volume{Name: "v" + string(rune('a'+i))}
		switch {
		case r.how == "env" && r.secret:
			c.Env = append(c.Env, corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: lo, Key: "key"}}})
		case r.how == "env":
			c.Env = append(c.Env, corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: lo, Key: "key"}}})
		case r.how == "envFrom" && r.secret:
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: lo}})
		case r.how == "envFrom":
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: lo}})
		case r.how == "volume" && r.secret:
			vol.Secret = &corev1.SecretVolumeSource{SecretName: r.name}
		case r.how == "volume":
			vol.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: lo}
		case r.how == "projected":
			vol.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: lo}}}}
		}
		if vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil {
			tpl.Spec.Volumes = append(tpl.Spec.Volumes, vol)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol.Name, MountPath: "/m/" + vol.Name})
		}
	}
}

// change edits one key of "Kind/name" ("Kind/name#key"; key by default).
func change(t *testing.T, ns, spec string) {
	t.Helper()
	kind, rest, _ := cut(spec, "/")
	name, key, _ := cut(rest, "#")
	if key == "" {
		key = "key"
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx := context.Background()
		if kind == "Secret" {
			var s corev1.Secret
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
				return err
			}
			s.Data[key] = []byte(string(s.Data[key]) + "1")
			return k8s.Update(ctx, &s)
		}
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return err
		}
		cm.Data[key] += "1"
		return k8s.Update(ctx, &cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func getRBP(t *testing.T, ns, name string) *autorebootv1alpha1.RebootPolicy {
	t.Helper()
	var rbp autorebootv1alpha1.RebootPolicy
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &rbp); err != nil {
		t.Fatal(err)
	}
	return &rbp
}

// waitTracked waits until the compat policy exists and has its baseline.
func waitTracked(t *testing.T, ns, policy string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var rbp autorebootv1alpha1.RebootPolicy
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policy}, &rbp)).To(Succeed())
		g.Expect(rbp.Status.Policies).To(HaveLen(1))
		ps := rbp.Status.Policies[0]
		g.Expect(ps.LastResult).To(Equal(autorebootv1alpha1.ResultSuccess), "policy %+v", ps)
		g.Expect(ps.Targets).To(HaveLen(1))
		g.Expect(ps.Targets[0].Fingerprint).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
}
