package rebootpolicy

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/testenv"
)

// TestArgoRollouts runs against the Rollout CRD generated from Argo
// Rollouts' API types (make argo-rollouts-crd). The suite starts without
// it: the first step checks a cluster without Argo Rollouts, the CRD is
// installed after it. The test plays the Rollout controller by writing
// the Rollouts' status.
func TestArgoRollouts(t *testing.T) {
	ns := createNamespace(t, "argo")
	rolloutTarget := autorebootv1alpha1.TargetRef{APIVersion: autorebootv1alpha1.ArgoRolloutsAPIVersion, Kind: autorebootv1alpha1.KindRollout, Name: "web"}
	changeConfigMap(t, ns, "app-config", "v1")
	if err := createRBP(t, newRBP(ns, "web", rolloutTarget, watchPolicy("app-config"))); err != nil {
		t.Fatal(err)
	}
	if !rolloutCRDInstalled {
		testWithoutRolloutCRD(t, ns)
		crd := filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "argoproj.io_rollouts.yaml")
		if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crd}}); err != nil {
			t.Fatal(err)
		}
		rolloutCRDInstalled = true
	}
	t.Run("once installed the missing Rollout is reported", func(t *testing.T) {
		NewWithT(t).Eventually(func() string { return degradedReason(t, ns, "web") }, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonTargetNotFound))
	})
	t.Run("a trigger sets spec.restartAt once and waits for the restart", func(t *testing.T) {
		testRolloutRestart(t, ns)
	})
	t.Run("selector", func(t *testing.T) { testRolloutSelector(t) })
	t.Run("referenced via template and workloadRef", func(t *testing.T) { testRolloutReferenced(t) })
}

// rolloutCRDInstalled: an earlier run in this process (-count) installed
// the Rollout CRD, which the apiserver keeps; the manager, which has seen
// the kind served, does not look for it again.
var rolloutCRDInstalled bool

func testWithoutRolloutCRD(t *testing.T, ns string) {
	t.Run("without the CRD the policy says so and stays quiet", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func() string { return degradedReason(t, ns, "web") }, timeout, interval).Should(Equal(autorebootv1alpha1.ReasonTargetKindNotInstalled))
		// No hot loop: once the trigger's baseline is written, the
		// recheck writes nothing while nothing changes.
		waitBaseline(t, ns, "web")
		g.Expect(degradedReason(t, ns, "web")).To(Equal(autorebootv1alpha1.ReasonTargetKindNotInstalled))
		rv := getRBP(t, ns, "web").ResourceVersion
		g.Consistently(func() string { return getRBP(t, ns, "web").ResourceVersion }, 5*time.Second, 500*time.Millisecond).Should(Equal(rv))
	})
}

func testRolloutRestart(t *testing.T, ns string) {
	g := NewWithT(t)
	createRollout(t, ns, "web", nil, inlineTemplate("other-config"))
	waitBaseline(t, ns, "web")
	changeConfigMap(t, ns, "app-config", "v2")
	var first string
	g.Eventually(func() string { first = restartAt(t, ns, "web"); return first }, timeout, interval).ShouldNot(BeEmpty())
	ro := getRollout(t, ns, "web")
	g.Expect(ro.GetAnnotations()).To(HaveKey(autorebootv1alpha1.RestartIDAnnotation))
	// Only spec.restartAt: the template and the replicas stay the Rollout
	// controller's and the user's.
	replicas, _, _ := unstructured.NestedInt64(ro.Object, "spec", "replicas")
	g.Expect(replicas).To(Equal(int64(2)))
	_, hasTemplateStamp, _ := unstructured.NestedString(ro.Object, "spec", "template", "metadata", "annotations", autorebootv1alpha1.RestartedAtAnnotation)
	g.Expect(hasTemplateStamp).To(BeFalse())
	g.Expect(restartAtManager(ro)).To(Equal("runbook-rebootpolicy"))

	// The Rollout controller observes the restart and replaces pods.
	setRolloutStatus(t, ns, "web", func(s map[string]any, gen int64) {
		s["observedGeneration"], s["phase"], s["availableReplicas"] = strconv.FormatInt(gen, 10), "Progressing", int64(1)
	})
	changeConfigMap(t, ns, "app-config", "v3")
	g.Eventually(func() string {
		c := conditionOf(getRBP(t, ns, "web"), autorebootv1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return c.Message
	}, timeout, interval).Should(ContainSubstring("still rolling out"))
	g.Expect(restartAt(t, ns, "web")).To(Equal(first), "a second restart stacked on the running one")
	g.Expect(getRBP(t, ns, "web").Status.RestartCount).To(Equal(int64(1)))

	// The restart finishes: the pending trigger restarts once more.
	setRolloutStatus(t, ns, "web", func(s map[string]any, gen int64) {
		s["observedGeneration"], s["phase"], s["availableReplicas"], s["restartedAt"] = strconv.FormatInt(gen, 10), "Healthy", int64(2), first
	})
	g.Eventually(func() string { return restartAt(t, ns, "web") }, timeout, interval).ShouldNot(Equal(first))
	g.Eventually(func() int64 { return getRBP(t, ns, "web").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	second := restartAt(t, ns, "web")
	g.Consistently(func() string { return restartAt(t, ns, "web") }, 3*time.Second, 300*time.Millisecond).Should(Equal(second))
	g.Expect(getRBP(t, ns, "web").Status.RestartCount).To(Equal(int64(2)), "restarted more than once per trigger")
}

func testRolloutSelector(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "argo-sel")
	changeConfigMap(t, ns, "shared", "v1")
	for _, name := range []string{"a", "b", "other"} {
		app := "shop"
		if name == "other" {
			app = "blog"
		}
		createRollout(t, ns, name, map[string]string{"app": app}, inlineTemplate("shared"))
	}
	target := autorebootv1alpha1.TargetRef{APIVersion: autorebootv1alpha1.ArgoRolloutsAPIVersion, Kind: autorebootv1alpha1.KindRollout,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"app": "shop"}}}
	if err := createRBP(t, newRBP(ns, "shop", target, watchPolicy("shared"))); err != nil {
		t.Fatal(err)
	}
	waitBaseline(t, ns, "shop")
	changeConfigMap(t, ns, "shared", "v2")
	for _, name := range []string{"a", "b"} {
		g.Eventually(func() string { return restartAt(t, ns, name) }, timeout, interval).ShouldNot(BeEmpty(), name)
	}
	g.Eventually(func() int64 { return getRBP(t, ns, "shop").Status.RestartCount }, timeout, interval).Should(Equal(int64(2)))
	g.Expect(restartAt(t, ns, "other")).To(BeEmpty(), "a Rollout the selector does not match was restarted")
}

func testRolloutReferenced(t *testing.T) {
	g := NewWithT(t)
	ns := createNamespace(t, "argo-ref")
	victimNS := createNamespace(t, "argo-victim")
	changeConfigMap(t, ns, "inline-cfg", "v1")
	changeConfigMap(t, ns, "ref-cfg", "v1")
	changeConfigMap(t, victimNS, "victim-cfg", "v1")
	createRollout(t, ns, "inline", nil, inlineTemplate("inline-cfg"))
	// The template comes from a Deployment of the namespace.
	tmpl := newDeployment(ns, "tmpl")
	tmpl.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ref-cfg"}}}}
	createObject(t, tmpl)
	createRollout(t, ns, "byref", nil, map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "tmpl"}})
	// Hostile: a workloadRef naming a Deployment of another namespace.
	victim := newDeployment(victimNS, "victim")
	victim.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "victim-cfg"}}}}
	createObject(t, victim)
	createRollout(t, ns, "hostile", nil, map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "victim", "namespace": victimNS}})
	_, kept, _ := unstructured.NestedString(getRollout(t, ns, "hostile").Object, "spec", "workloadRef", "namespace")
	g.Expect(kept).To(BeFalse(), "the Rollout CRD kept a workloadRef namespace")

	target := autorebootv1alpha1.TargetRef{APIVersion: autorebootv1alpha1.ArgoRolloutsAPIVersion, Kind: autorebootv1alpha1.KindRollout,
		Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"rollout": "yes"}}}
	rbp := newRBP(ns, "refs", target, autorebootv1alpha1.Policy{Name: "refs", Trigger: autorebootv1alpha1.Trigger{
		Referenced: &autorebootv1alpha1.ReferencedTrigger{PeriodSeconds: 1}}})
	if err := createRBP(t, rbp); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() []string {
		var named []string
		for _, ps := range getRBP(t, ns, "refs").Status.Policies {
			for _, ts := range ps.Targets {
				if ts.Fingerprint != "" {
					named = append(named, ts.Name)
				}
			}
		}
		return named
	}, timeout, interval).Should(ConsistOf("byref", "hostile", "inline"))
	changeConfigMap(t, victimNS, "victim-cfg", "v2")
	changeConfigMap(t, ns, "inline-cfg", "v2")
	g.Eventually(func() string { return restartAt(t, ns, "inline") }, timeout, interval).ShouldNot(BeEmpty())
	changeConfigMap(t, ns, "ref-cfg", "v2")
	g.Eventually(func() string { return restartAt(t, ns, "byref") }, timeout, interval).ShouldNot(BeEmpty())
	g.Consistently(func() string { return restartAt(t, ns, "hostile") }, 3*time.Second, 300*time.Millisecond).Should(BeEmpty(),
		"a change in another namespace restarted a Rollout")
}

// inlineTemplate is a Rollout spec part whose template takes env from cm.
func inlineTemplate(cm string) map[string]any {
	tmpl := podTemplate.DeepCopy()
	tmpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		panic(err)
	}
	return map[string]any{"template": m}
}

// createRollout creates a Rollout of 2 replicas labelled rollout=yes and
// labels, with spec parts, and plays its controller: rolled out.
func createRollout(t *testing.T, ns, name string, labels map[string]string, spec map[string]any) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(autorebootv1alpha1.ArgoRolloutsAPIVersion)
	u.SetKind("Rollout")
	u.SetNamespace(ns)
	u.SetName(name)
	all := map[string]string{"rollout": "yes"}
	for k, v := range labels {
		all[k] = v
	}
	u.SetLabels(all)
	s := map[string]any{"replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"strategy": map[string]any{"canary": map[string]any{}}}
	for k, v := range spec {
		s[k] = v
	}
	u.Object["spec"] = s
	createObject(t, u)
	setRolloutStatus(t, ns, name, func(st map[string]any, gen int64) {
		st["observedGeneration"], st["phase"] = strconv.FormatInt(gen, 10), "Healthy"
		st["replicas"], st["updatedReplicas"], st["readyReplicas"], st["availableReplicas"] = int64(2), int64(2), int64(2), int64(2)
	})
}

func createObject(t *testing.T, obj client.Object) {
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func getRollout(t *testing.T, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(autorebootv1alpha1.ArgoRolloutsAPIVersion)
	u.SetKind("Rollout")
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

func restartAt(t *testing.T, ns, name string) string {
	s, _, _ := unstructured.NestedString(getRollout(t, ns, name).Object, "spec", "restartAt")
	return s
}

// setRolloutStatus writes the status the Rollout controller would.
func setRolloutStatus(t *testing.T, ns, name string, change func(map[string]any, int64)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := getRollout(t, ns, name)
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		if st == nil {
			st = map[string]any{}
		}
		change(st, u.GetGeneration())
		u.Object["status"] = st
		return k8s.Status().Update(context.Background(), u)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func restartAtManager(u *unstructured.Unstructured) string {
	for _, mf := range u.GetManagedFields() {
		if mf.FieldsV1 != nil && containsField(mf, "f:restartAt") {
			return mf.Manager
		}
	}
	return ""
}

func containsField(mf metav1.ManagedFieldsEntry, f string) bool {
	return strings.Contains(mf.FieldsV1.GetRawString(), f)
}

func degradedReason(t *testing.T, ns, name string) string {
	c := conditionOf(getRBP(t, ns, name), autorebootv1alpha1.ConditionDegraded)
	if c == nil {
		return ""
	}
	return c.Reason
}

func conditionOf(rbp *autorebootv1alpha1.RebootPolicy, typ string) *metav1.Condition {
	for i := range rbp.Status.Conditions {
		if rbp.Status.Conditions[i].Type == typ {
			return &rbp.Status.Conditions[i]
		}
	}
	return nil
}

func TestRolloutTargetNeedsItsAPIVersion(t *testing.T) {
	ns := createNamespace(t, "argo-val")
	for _, tc := range []struct {
		apiVersion string
		kind       autorebootv1alpha1.TargetKind
	}{
		{"apps/v1", autorebootv1alpha1.KindRollout},
		{autorebootv1alpha1.ArgoRolloutsAPIVersion, autorebootv1alpha1.KindDeployment},
	} {
		rbp := newRBP(ns, "bad", autorebootv1alpha1.TargetRef{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "web"}, watchPolicy("cfg"))
		err := k8s.Create(context.Background(), rbp, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "target.apiVersion must be argoproj.io/v1alpha1 for kind Rollout") {
			t.Errorf("%s %s: %v, want the apiVersion refused", tc.apiVersion, tc.kind, err)
		}
	}
	ok := newRBP(ns, "ok", autorebootv1alpha1.TargetRef{APIVersion: autorebootv1alpha1.ArgoRolloutsAPIVersion, Kind: autorebootv1alpha1.KindRollout, Name: "web"}, watchPolicy("cfg"))
	if err := k8s.Create(context.Background(), ok, client.DryRunAll); err != nil {
		t.Errorf("a Rollout target refused: %v", err)
	}
}
