package nsscaler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

func TestGitOpsRefsOf(t *testing.T) {
	nn := func(ns, n string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: n} }
	cases := []struct {
		name string
		w    Workload
		want map[string]types.NamespacedName
	}{
		{"flux kustomization", Workload{Labels: map[string]string{labelKustomizeName: "apps", labelKustomizeNamespace: "flux-system"}},
			map[string]types.NamespacedName{"Kustomization": nn("flux-system", "apps")}},
		{"flux helm release", Workload{Labels: map[string]string{labelHelmName: "db", labelHelmNamespace: "team"}},
			map[string]types.NamespacedName{"HelmRelease": nn("team", "db")}},
		{"argo tracking id in argo's namespace", Workload{ArgoCDTrackingID: "web:apps/Deployment:team/web"},
			map[string]types.NamespacedName{"Application": nn("argocd", "web")}},
		{"argo tracking id, app in any namespace", Workload{ArgoCDTrackingID: "team_web:apps/Deployment:team/web"},
			map[string]types.NamespacedName{"Application": nn("team", "web")}},
		{"argo instance label", Workload{Labels: map[string]string{labelArgoCDInstance: "web"}},
			map[string]types.NamespacedName{"Application": nn("argocd", "web")}},
		{"malformed tracking id", Workload{ArgoCDTrackingID: "web"}, map[string]types.NamespacedName{}},
		{"invalid names are dropped", Workload{Labels: map[string]string{labelKustomizeName: "Apps!", labelKustomizeNamespace: "flux-system"}},
			map[string]types.NamespacedName{}},
		{"a namespace is required", Workload{Labels: map[string]string{labelKustomizeName: "apps"}}, map[string]types.NamespacedName{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]types.NamespacedName{}
			for _, r := range gitOpsRefsOf(c.w, "argocd") {
				got[r.kind.kind] = r.key
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func obj(o map[string]any, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: o}
	u.SetNamespace(ns)
	return u
}

func TestGitOpsManages(t *testing.T) {
	cases := []struct {
		name string
		k    *gitOpsKind
		u    *unstructured.Unstructured
		ns   string
		want bool
	}{
		{"kustomization target namespace", gitOpsKustomization, obj(map[string]any{"spec": map[string]any{"targetNamespace": "a"}}, "flux"), "a", true},
		{"kustomization inventory", gitOpsKustomization, obj(map[string]any{"status": map[string]any{"inventory": map[string]any{
			"entries": []any{map[string]any{"id": "a_web_apps_Deployment"}}}}}, "flux"), "a", true},
		{"kustomization inventory of a namespace with that prefix", gitOpsKustomization, obj(map[string]any{"status": map[string]any{"inventory": map[string]any{
			"entries": []any{map[string]any{"id": "ab_web_apps_Deployment"}}}}}, "flux"), "a", false},
		{"kustomization of another namespace", gitOpsKustomization, obj(map[string]any{"spec": map[string]any{"targetNamespace": "b"}}, "flux"), "a", false},
		{"kustomization without target or inventory", gitOpsKustomization, obj(map[string]any{"spec": map[string]any{}}, "a"), "a", false},
		{"helm release in its own namespace", gitOpsHelmRelease, obj(map[string]any{"spec": map[string]any{}}, "a"), "a", true},
		{"helm release targeting another namespace", gitOpsHelmRelease, obj(map[string]any{"spec": map[string]any{"targetNamespace": "b"}}, "a"), "a", false},
		{"helm release history", gitOpsHelmRelease, obj(map[string]any{"spec": map[string]any{"targetNamespace": "b"},
			"status": map[string]any{"history": []any{map[string]any{"namespace": "a"}}}}, "flux"), "a", true},
		{"application destination", gitOpsApplication, obj(map[string]any{"spec": map[string]any{"destination": map[string]any{"namespace": "a"}}}, "argocd"), "a", true},
		{"application resources", gitOpsApplication, obj(map[string]any{"spec": map[string]any{"destination": map[string]any{"namespace": "b"}},
			"status": map[string]any{"resources": []any{map[string]any{"namespace": "a", "kind": "Deployment", "name": "x"}}}}, "argocd"), "a", true},
		{"application of another namespace", gitOpsApplication, obj(map[string]any{"spec": map[string]any{"destination": map[string]any{"namespace": "b"}}}, "argocd"), "a", false},
	}
	for _, c := range cases {
		if got := c.k.manages(c.u, c.ns); got != c.want {
			t.Errorf("%s: manages = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGitOpsIsPaused(t *testing.T) {
	auto := func(a any) *unstructured.Unstructured {
		return obj(map[string]any{"spec": map[string]any{"syncPolicy": map[string]any{"automated": a}}}, "argocd")
	}
	for _, c := range []struct {
		name string
		u    *unstructured.Unstructured
		want bool
	}{
		{"no sync policy", obj(map[string]any{"spec": map[string]any{}}, "argocd"), true},
		{"automated", auto(map[string]any{"selfHeal": true}), false},
		{"automated, empty", auto(map[string]any{}), false},
		{"automated disabled", auto(map[string]any{"enabled": false}), true},
		{"automated enabled", auto(map[string]any{"enabled": true}), false},
	} {
		if got := gitOpsApplication.isPaused(c.u); got != c.want {
			t.Errorf("%s: isPaused = %v, want %v", c.name, got, c.want)
		}
	}
	if gitOpsKustomization.isPaused(obj(map[string]any{"spec": map[string]any{}}, "f")) {
		t.Error("a Kustomization without spec.suspend is not paused")
	}
	if !gitOpsKustomization.isPaused(obj(map[string]any{"spec": map[string]any{"suspend": true}}, "f")) {
		t.Error("a suspended Kustomization is paused")
	}
}

// TestGitOpsRecordRoundTrip: the pause records the field as it was (absent
// as null), and the resume patch puts exactly that back.
func TestGitOpsRecordRoundTrip(t *testing.T) {
	u := obj(map[string]any{"spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"selfHeal": true, "prune": false}}}}, "argocd")
	raw, err := newRecord(gitOpsApplication, u, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{AnnotationGitOpsPaused: raw})
	rec, ok, err := recordOf(u)
	if !ok || err != nil || rec.By != "nightly" {
		t.Fatalf("recordOf = %+v, %v, %v", rec, ok, err)
	}
	patch, err := fieldPatch(gitOpsApplication.field, rec.Previous, "42", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"spec":     map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"selfHeal": true, "prune": false}}},
		"metadata": map[string]any{"resourceVersion": "42", "annotations": map[string]any{AnnotationGitOpsPaused: nil}},
	}
	if gotJSON, wantJSON := jsonOf(t, got), jsonOf(t, want); gotJSON != wantJSON {
		t.Errorf("resume patch %s, want %s", gotJSON, wantJSON)
	}
	// An absent spec.suspend is recorded as null and removed on resume.
	k := obj(map[string]any{"spec": map[string]any{}}, "flux")
	raw, _ = newRecord(gitOpsKustomization, k, "nightly")
	if raw != `{"v":1,"by":"nightly","previous":null}` {
		t.Errorf("record %s", raw)
	}
	for _, bad := range []string{"{", `{"v":2,"by":"x"}`, string(make([]byte, maxGitOpsRecordLength+1))} {
		k.SetAnnotations(map[string]string{AnnotationGitOpsPaused: bad})
		if _, ok, err := recordOf(k); !ok || err == nil {
			t.Errorf("record %.20q: want an error", bad)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noMatchReader answers every list as an apiserver without the CRD does.
type noMatchReader struct{ client.Reader }

func (noMatchReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	gvk := list.GetObjectKind().GroupVersionKind()
	return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

// TestGitOpsWithoutCRDsIsReported: with the tools enabled but their CRDs
// not installed, the pass lists nothing, writes nothing, and the status
// says which kinds are missing; the reconcile is retried later, not failed.
func TestGitOpsWithoutCRDsIsReported(t *testing.T) {
	r := &Reconciler{apiReader: noMatchReader{}}
	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: scalingv1alpha1.NSScalerSpec{GitOps: &scalingv1alpha1.GitOpsSpec{Flux: true, ArgoCD: true}}}
	obs := newObservation(scaler, time.Unix(0, 0))
	obs.plan = Plan{Parked: sets.New("a"), Active: sets.New[string]()}
	p := r.newGitOpsPass(scaler, obs)
	if p == nil {
		t.Fatal("no GitOps pass with gitOps enabled")
	}
	r.pauseGitOps(context.Background(), scaler, p, nil)
	if len(obs.gitOps.missing) != 3 || len(obs.gitOps.errs) != 0 || len(obs.gitOps.held) != 0 {
		t.Fatalf("missing %d, errs %v, held %d", len(obs.gitOps.missing), obs.gitOps.errs, len(obs.gitOps.held))
	}
	var conds []metav1.Condition
	setGitOpsPaused(&conds, status.NewConditions(&conds, 1, time.Unix(0, 0)), &obs.gitOps)
	c := meta.FindStatusCondition(conds, scalingv1alpha1.ConditionGitOpsPaused)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != scalingv1alpha1.ReasonGitOpsKindMissing {
		t.Fatalf("condition %+v", c)
	}
	for _, want := range []string{"Kustomization (kustomize.toolkit.fluxcd.io/v1)", "HelmRelease", "Application (argoproj.io/v1alpha1)"} {
		if !contains(c.Message, want) {
			t.Errorf("message %q does not name %s", c.Message, want)
		}
	}
	res, err := obs.result()
	if err != nil || res.RequeueAfter != kindRetryAfter {
		t.Errorf("result %+v, %v: want a retry after %s", res, err, kindRetryAfter)
	}
	if st := gitOpsStatus(&obs.gitOps); st == nil || st.PausedCount != 0 {
		t.Errorf("status %+v", st)
	}
	// Without spec.gitOps and nothing paused there is no pass at all.
	scaler.Spec.GitOps = nil
	if r.newGitOpsPass(scaler, newObservation(scaler, time.Unix(0, 0))) != nil {
		t.Error("a GitOps pass without spec.gitOps")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
