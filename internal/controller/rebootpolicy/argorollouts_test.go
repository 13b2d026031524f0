package rebootpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/probe/probetest"
)

// argoRollout is a Rollout of 3 replicas at generation 4 whose status
// the test sets as the Rollout controller would.
func argoRollout(status map[string]any) *unstructured.Unstructured {
	u := newRolloutObject()
	u.SetNamespace("ns")
	u.SetName("web")
	u.SetGeneration(4)
	u.Object["spec"] = map[string]any{"replicas": int64(3)}
	u.Object["status"] = status
	return u
}

func healthyStatus() map[string]any {
	return map[string]any{"observedGeneration": "4", "phase": "Healthy", "replicas": int64(3), "updatedReplicas": int64(3),
		"readyReplicas": int64(3), "availableReplicas": int64(3)}
}

func withStatus(change func(map[string]any)) map[string]any {
	s := healthyStatus()
	change(s)
	return s
}

func TestRolloutPhaseFromTheRolloutsOwnStatus(t *testing.T) {
	restarting := argoRollout(healthyStatus())
	restarting.Object["spec"].(map[string]any)["restartAt"] = "2026-01-02T03:04:05Z"
	restartedPaused := argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Paused"; s["restartedAt"] = "2026-01-02T03:04:05Z" }))
	restartedPaused.Object["spec"].(map[string]any)["restartAt"] = "2026-01-02T03:04:05Z"
	restartingPaused := argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Paused" }))
	restartingPaused.Object["spec"].(map[string]any)["restartAt"] = "2026-01-02T03:04:05Z"
	workloadRefBehind := argoRollout(withStatus(func(s map[string]any) { s["workloadObservedGeneration"] = "6" }))
	workloadRefBehind.SetAnnotations(map[string]string{workloadGenerationAnnotation: "7"})
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want rolloutPhase
	}{
		{"healthy", argoRollout(healthyStatus()), rolloutComplete},
		{"spec not observed", argoRollout(withStatus(func(s map[string]any) { s["observedGeneration"] = "3" })), rolloutRolling},
		{"observedGeneration a hash (old controller)", argoRollout(withStatus(func(s map[string]any) { s["observedGeneration"] = "6b9f8c" })), rolloutComplete},
		{"workloadRef generation not observed", workloadRefBehind, rolloutRolling},
		{"restart not acknowledged", restarting, rolloutRolling},
		{"restart not acknowledged while paused", restartingPaused, rolloutRolling},
		{"restart acknowledged, paused at a step", restartedPaused, rolloutStuck},
		{"manually paused", func() *unstructured.Unstructured {
			u := argoRollout(healthyStatus())
			u.Object["spec"].(map[string]any)["paused"] = true
			return u
		}(), rolloutStuck},
		{"degraded (aborted or timed out)", argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Degraded"; s["updatedReplicas"] = int64(1) })), rolloutStuck},
		{"canary steps left", argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Progressing"; s["updatedReplicas"] = int64(1) })), rolloutRolling},
		{"new replicas not available yet", argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Progressing"; s["availableReplicas"] = int64(2) })), rolloutFinishing},
		{"waiting for promotion checks", argoRollout(withStatus(func(s map[string]any) { s["phase"] = "Progressing" })), rolloutFinishing},
		{"no status yet", argoRollout(nil), rolloutRolling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rolloutPhaseOf(tc.obj); got != tc.want {
				t.Errorf("phase %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRolloutRestartStampIsSpecRestartAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 10, 0, time.UTC)
	u := argoRollout(healthyStatus())
	u.Object["spec"].(map[string]any)["restartAt"] = "2026-01-02T03:04:05Z"
	ti := inspectTarget(u, now, nil)
	if ti.kind != autorebootv1alpha1.KindRollout || !ti.restartedAt.Equal(now.Add(-5*time.Second)) || !ti.progressing {
		t.Fatalf("target %+v: want a Rollout restarted at spec.restartAt, still restarting", ti)
	}
	u.Object["spec"].(map[string]any)["restartAt"] = "2026-01-02T04:00:00Z"
	if ti := inspectTarget(u, now, nil); !ti.stampInFuture || !ti.restartedAt.IsZero() {
		t.Errorf("a restartAt in the future must be reported and ignored, got %+v", ti)
	}
}

func TestRolloutRestartPatchSetsOnlyRestartAt(t *testing.T) {
	p := rolloutRestartPatch(time.Date(2026, 1, 2, 3, 4, 5, 999_000_000, time.UTC), "42", "rbp/abc")
	data, err := p.Data(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"resourceVersion":"42","annotations":{"autoreboot.runbook.dev/restart-id":"rbp/abc"}},"spec":{"restartAt":"2026-01-02T03:04:05Z"}}`
	if string(data) != want {
		t.Errorf("patch %s, want %s", data, want)
	}
}

func TestRolloutTemplateFromWorkloadRefStaysInTheNamespace(t *testing.T) {
	ref := func(ns, name string, cm string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3, UID: types.UID("uid-" + ns)},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: cm}}}}
	}
	reader := fake.NewClientBuilder().WithObjects(ref("other", "tmpl", "victim"), ref("ns", "tmpl", "own")).Build()
	w := workloads{reader: reader}
	u := argoRollout(healthyStatus())
	u.Object["spec"].(map[string]any)["workloadRef"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "tmpl", "namespace": "other"}
	if got := w.PodSpec(u).ServiceAccountName; got != "own" {
		t.Errorf("template from %q, want the Rollout's own namespace's Deployment", got)
	}
	if v := w.TemplateVersion(u); !strings.HasSuffix(v, "/uid-ns/3") {
		t.Errorf("version %q does not follow the referenced Deployment", v)
	}
	if err := reader.Delete(context.Background(), ref("ns", "tmpl", "own")); err != nil {
		t.Fatal(err)
	}
	if got := w.PodSpec(u).ServiceAccountName; got != "" {
		t.Errorf("with no Deployment of that name in the namespace, the template must be empty, got %q", got)
	}
	u.Object["spec"].(map[string]any)["workloadRef"] = map[string]any{"apiVersion": "v1", "kind": "PodTemplate", "name": "tmpl"}
	u.Object["spec"].(map[string]any)["template"] = map[string]any{"spec": map[string]any{"serviceAccountName": "inline"}}
	if got := w.PodSpec(u).ServiceAccountName; got != "inline" {
		t.Errorf("an unsupported workloadRef kind must leave spec.template, got %q", got)
	}
}

func TestRolloutKindNotServedIsRememberedForTheRecheck(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	mapper := &countingMapper{}
	a := &argoRollouts{mapper: mapper, clock: clk, recheck: time.Minute}
	for range 3 {
		err := a.ready(context.Background())
		if _, ok := errorIsKindNotServed(err); !ok {
			t.Fatalf("ready: %v, want kind not served", err)
		}
	}
	if mapper.calls != 1 {
		t.Fatalf("%d discoveries within the recheck, want 1", mapper.calls)
	}
	clk.Step(time.Minute)
	_ = a.ready(context.Background())
	if mapper.calls != 2 {
		t.Fatalf("%d discoveries after the recheck, want 2", mapper.calls)
	}
}

// countingMapper serves no Rollout kind and counts the lookups.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
}

func TestRolloutTargetWithoutTheKindIsDegradedAndRechecked(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := probetest.NewProbers()
	f.SetResults("health", ok)
	rbp := pendingPolicy(now.Add(-time.Second))
	rbp.Spec.Target = autorebootv1alpha1.TargetRef{APIVersion: autorebootv1alpha1.ArgoRolloutsAPIVersion, Kind: autorebootv1alpha1.KindRollout, Name: "web"}
	fx := newReconcileFixture(t, f, rbp)
	res := fx.reconcile(t)
	if res.RequeueAfter != DefaultRolloutKindRecheck {
		t.Errorf("requeue after %s, want the recheck %s (no hot loop, no giving up)", res.RequeueAfter, DefaultRolloutKindRecheck)
	}
	st := fx.rbp(t).Status
	c := conditionOf(fx.rbp(t), autorebootv1alpha1.ConditionDegraded)
	if c == nil || c.Reason != autorebootv1alpha1.ReasonTargetKindNotInstalled || !strings.Contains(c.Message, "install Argo Rollouts") {
		t.Fatalf("Degraded %+v, want TargetKindNotInstalled", c)
	}
	if _, pending := pendingSince(st.Policies); !pending || st.RestartCount != 0 {
		t.Fatalf("pending=%v restartCount=%d: the trigger must wait for the kind", pending, st.RestartCount)
	}
}
