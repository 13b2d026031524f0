package nsscaler

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// Only the kinds the apiserver serves at start are watched; a failed
// lookup is reported and leaves the kind unwatched.
func TestServedGitOpsKinds(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gitOpsKustomization.gvk, meta.RESTScopeNamespace)
	var failed []string
	got := servedGitOpsKinds(mapper, func(k *gitOpsKind, err error) { failed = append(failed, k.kind) })
	if len(got) != 1 || got[0] != gitOpsKustomization || len(failed) != 0 {
		t.Fatalf("served %v, failed %v", got, failed)
	}
	broken := failingMapper{RESTMapper: mapper}
	got = servedGitOpsKinds(broken, func(k *gitOpsKind, err error) { failed = append(failed, k.kind) })
	if len(got) != 0 || len(failed) != len(gitOpsKinds) {
		t.Fatalf("with discovery failing: served %v, failed %v", got, failed)
	}
}

type failingMapper struct{ meta.RESTMapper }

func (failingMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("discovery unavailable")
}

func withRecord(u *unstructured.Unstructured, rec string) *unstructured.Unstructured {
	u.SetAnnotations(map[string]string{AnnotationGitOpsPaused: rec, "other": "x"})
	return u
}

// The cache keeps the record and the paused field only; an overlong
// record is not kept.
func TestTrimGitOpsObject(t *testing.T) {
	app := withRecord(gitOpsFixture(gitOpsApplication, "argocd", "web", map[string]any{
		"destination": map[string]any{"namespace": "a"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"selfHeal": true}, "retry": map[string]any{"limit": int64(3)}},
	}), `{"v":1,"by":"nights","previous":null}`)
	app.Object["status"] = map[string]any{"resources": []any{map[string]any{"namespace": "a"}}}
	out, err := trimGitOpsObject(app)
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	want := map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"selfHeal": true}}}
	if !reflect.DeepEqual(u.Object["spec"], want) || u.Object["status"] != nil || len(u.GetAnnotations()) != 1 || u.GetName() != "web" {
		t.Fatalf("trimmed %+v", u.Object)
	}
	long := withRecord(gitOpsFixture(gitOpsKustomization, "flux", "apps", map[string]any{"suspend": true}), strings.Repeat("x", maxGitOpsRecordLength+1))
	out, _ = trimGitOpsObject(long)
	if u := out.(*unstructured.Unstructured); len(u.GetAnnotations()) != 0 || !fluxSuspended(u) {
		t.Fatalf("overlong record kept: %+v", u.Object)
	}
}

// Only a recorded object that runs (someone resumed it) passes, and the
// deletion of a recorded one; the controller's own pause (paused) and
// resume (no record) do not.
func TestResumedWhileRecorded(t *testing.T) {
	p := resumedWhileRecorded(gitOpsKustomization)
	rec := `{"v":1,"by":"nights","previous":null}`
	paused := withRecord(gitOpsFixture(gitOpsKustomization, "flux", "apps", map[string]any{"suspend": true}), rec)
	resumedByHand := withRecord(gitOpsFixture(gitOpsKustomization, "flux", "apps", map[string]any{"suspend": false}), rec)
	resumedByUs := gitOpsFixture(gitOpsKustomization, "flux", "apps", map[string]any{})
	for _, tc := range []struct {
		name string
		old  *unstructured.Unstructured
		new  *unstructured.Unstructured
		want bool
	}{
		{"our pause", resumedByUs, paused, false},
		{"resumed by hand", paused, resumedByHand, true},
		{"our resume", paused, resumedByUs, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
	if !p.Create(event.CreateEvent{Object: resumedByHand}) || p.Create(event.CreateEvent{Object: paused}) || p.Create(event.CreateEvent{Object: resumedByUs}) {
		t.Error("create")
	}
	if !p.Delete(event.DeleteEvent{Object: paused}) || p.Delete(event.DeleteEvent{Object: resumedByUs}) {
		t.Error("delete")
	}
}

// A record reconciles only the NSScaler it names, and only when that one
// pauses the kind or holds objects paused: a record anyone forged, an
// unreadable or overlong one, or one naming an NSScaler without GitOps,
// reconciles nothing.
func TestScalersForGitOpsObject(t *testing.T) {
	scheme := runtime.NewScheme()
	utilruntime.Must(scalingv1alpha1.AddToScheme(scheme))
	flux := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "flux"}, Spec: scalingv1alpha1.NSScalerSpec{GitOps: &scalingv1alpha1.GitOpsSpec{Flux: true}}}
	argo := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "argo"}, Spec: scalingv1alpha1.NSScalerSpec{GitOps: &scalingv1alpha1.GitOpsSpec{ArgoCD: true}}}
	holding := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "holding"}, Status: scalingv1alpha1.NSScalerStatus{GitOps: &scalingv1alpha1.GitOpsStatus{PausedCount: 1}}}
	plain := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	r := &Reconciler{client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(flux, argo, holding, plain).Build()}
	names := func(rec string) string {
		var out []string
		for _, req := range r.scalersForGitOpsObject(context.Background(), withRecord(gitOpsFixture(gitOpsKustomization, "flux", "apps", nil), rec)) {
			out = append(out, req.Name)
		}
		return strings.Join(out, ",")
	}
	for rec, want := range map[string]string{
		`{"v":1,"by":"flux","previous":null}`:    "flux",
		`{"v":1,"by":"holding","previous":null}`: "holding",
		`{"v":1,"by":"argo","previous":null}`:    "", // does not pause Kustomizations
		`{"v":1,"by":"plain","previous":null}`:   "",
		`{"v":1,"by":"nobody","previous":null}`:  "",
		`{"v":1,"by":""}`:                        "",
		`not json`:                               "",
		`{"by":"flux","pad":"` + strings.Repeat("x", maxGitOpsRecordLength) + `"}`: "",
	} {
		if got := names(rec); got != want {
			t.Errorf("record %.60s: reconciles %q, want %q", rec, got, want)
		}
	}
}
