package nsscaler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// workloadsOnly is a kind handler that only lists fixed workloads.
type workloadsOnly struct {
	kindHandler
	ws []Workload
}

func (h workloadsOnly) each(_ context.Context, fn func(Workload)) error {
	for _, w := range h.ws {
		fn(w)
	}
	return nil
}

func gitOpsFixture(k *gitOpsKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(k.gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestGitOpsPassPausesOnceAndResumesExactly drives the pass against an
// in-memory apiserver: the verified objects are paused with their record,
// a second pass (a restart) writes nothing, the forged claim and the
// owner's suspension are left alone, and once nothing is parked each
// paused object gets back exactly what it had.
func TestGitOpsPassPausesOnceAndResumesExactly(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range gitOpsKinds {
		mapper.Add(k.gvk, meta.RESTScopeNamespace)
	}
	apps := gitOpsFixture(gitOpsKustomization, "flux", "apps", map[string]any{"targetNamespace": "a", "suspend": false})
	other := gitOpsFixture(gitOpsKustomization, "flux", "team-b", map[string]any{"targetNamespace": "b"})
	db := gitOpsFixture(gitOpsHelmRelease, "flux", "db", map[string]any{"targetNamespace": "a", "suspend": true})
	web := gitOpsFixture(gitOpsApplication, "argocd", "web", map[string]any{
		"destination": map[string]any{"namespace": "a"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"selfHeal": true}},
	})
	patches := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(mapper).
		WithObjects(apps, other, db, web).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			return cl.Patch(ctx, obj, p, opts...)
		},
	})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{client: c, apiReader: c, metrics: metrics, argoCDNamespace: "argocd"}
	handlers := []kindHandler{workloadsOnly{ws: []Workload{
		{Namespace: "a", Name: "web", Labels: map[string]string{labelKustomizeName: "apps", labelKustomizeNamespace: "flux"}},
		{Namespace: "a", Name: "db", Labels: map[string]string{labelHelmName: "db", labelHelmNamespace: "flux"}},
		{Namespace: "a", Name: "api", ArgoCDTrackingID: "web:apps/Deployment:a/api"},
		{Namespace: "a", Name: "evil", Labels: map[string]string{labelKustomizeName: "team-b", labelKustomizeNamespace: "flux"}},
		{Namespace: "b", Name: "svc", Labels: map[string]string{labelKustomizeName: "team-b", labelKustomizeNamespace: "flux"}},
	}}}
	scaler := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: scalingv1alpha1.NSScalerSpec{GitOps: &scalingv1alpha1.GitOpsSpec{Flux: true, ArgoCD: true}}}
	pass := func(parked ...string) *observation {
		obs := newObservation(scaler, time.Unix(0, 0))
		obs.plan = Plan{Parked: sets.New(parked...), Active: sets.New[string]()}
		p := r.newGitOpsPass(scaler, obs)
		r.pauseGitOps(context.Background(), scaler, p, handlers)
		r.resumeGitOps(context.Background(), scaler, p)
		if len(obs.gitOps.errs) > 0 {
			t.Fatalf("errors: %v", obs.gitOps.errs)
		}
		scaler.Status.GitOps = gitOpsStatus(&obs.gitOps)
		return obs
	}
	read := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	obs := pass("a")
	if n := len(obs.gitOps.held); n != 2 || obs.gitOps.pausedByOthers != 1 || obs.gitOps.unverified != 1 || patches != 2 {
		t.Fatalf("held %d, by others %d, unverified %d, patches %d; want 2, 1, 1, 2", n, obs.gitOps.pausedByOthers, obs.gitOps.unverified, patches)
	}
	if got := read(apps); !fluxSuspended(got) || got.GetAnnotations()[AnnotationGitOpsPaused] != `{"v":1,"by":"nightly","previous":false}` {
		t.Errorf("apps: %v", got.Object)
	}
	if got := read(web); !argoNotAutomated(got) || got.GetAnnotations()[AnnotationGitOpsPaused] != `{"v":1,"by":"nightly","previous":{"selfHeal":true}}` {
		t.Errorf("web: %v", got.Object)
	}
	for _, u := range []*unstructured.Unstructured{other, db} {
		if got := read(u); got.GetAnnotations()[AnnotationGitOpsPaused] != "" || fluxSuspended(got) != fluxSuspended(u) {
			t.Errorf("%s was written: %v", u.GetName(), got.Object)
		}
	}

	// A restart: the records are found, nothing is written again.
	if pass("a"); patches != 2 {
		t.Errorf("a second pass patched %d times", patches-2)
	}

	obs = pass()
	if len(obs.gitOps.held) != 0 || len(obs.gitOps.resumed) != 2 {
		t.Fatalf("held %d, resumed %d after wake", len(obs.gitOps.held), len(obs.gitOps.resumed))
	}
	if got := read(apps); fluxSuspended(got) || got.GetAnnotations()[AnnotationGitOpsPaused] != "" {
		t.Errorf("apps after wake: %v", got.Object)
	} else if s, found, _ := unstructured.NestedBool(got.Object, "spec", "suspend"); !found || s {
		t.Errorf("apps: spec.suspend should be back at an explicit false")
	}
	got := read(web)
	auto, _, _ := unstructured.NestedMap(got.Object, "spec", "syncPolicy", "automated")
	if len(auto) != 1 || auto["selfHeal"] != true || got.GetAnnotations()[AnnotationGitOpsPaused] != "" {
		t.Errorf("web after wake: %v", got.Object)
	}
	if !fluxSuspended(read(db)) {
		t.Error("db, suspended by its owner, was resumed")
	}
}
