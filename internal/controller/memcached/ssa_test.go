package memcached

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// A reconcile whose inputs did not change neither builds the desired
// Deployment nor writes; a spec change (a new generation) builds and
// applies it.
func TestApplyIfChangedBuildsOnlyForNewInputs(t *testing.T) {
	ctx := context.Background()
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	}
	lc := newLaggingCache(t, mc.DeepCopy())
	r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), nil)
	r.applied = newAppliedMemo()

	builds, extracts := 0, 0
	apply := func(mc *cachev1alpha1.Memcached) bool {
		t.Helper()
		s, invalid := resolveSettings(&mc.Spec)
		if invalid != nil {
			t.Fatal(invalid)
		}
		var live client.Object
		d, err := getLive(ctx, lc.server, client.ObjectKeyFromObject(mc), &appsv1.Deployment{})
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			live = d
		}
		build := func() (runtime.ApplyConfiguration, error) { builds++; return desiredDeployment(mc, s) }
		applied, err := r.applyIfChanged(ctx, inputsOf(mc, s), build, live, &appsv1.Deployment{},
			func() (any, error) { extracts++; return appsv1ac.ExtractDeployment(d, FieldManager) })
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}

	if !apply(mc) || builds != 1 {
		t.Fatalf("creation: builds %d, want 1 and an apply", builds)
	}
	for range 3 {
		if apply(mc) {
			t.Fatal("applied again with unchanged inputs")
		}
	}
	if builds != 1 || extracts != 0 {
		t.Fatalf("builds %d, extracts %d after three reconciles with unchanged inputs, want 1 and 0", builds, extracts)
	}

	mc.Spec.Size = ptr.To[int32](3)
	mc.Generation = 2
	if !apply(mc) || builds != 2 {
		t.Fatalf("spec change: builds %d, want 2 and an apply", builds)
	}
	d := &appsv1.Deployment{}
	if err := lc.server.Get(ctx, client.ObjectKeyFromObject(mc), d); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
		t.Fatalf("replicas %d after the spec change, want 3", got)
	}
}

// Only a live object that lacks desired fields, and differs in nothing
// else, is worth a dry run; a changed value or a field no longer desired
// is applied at once.
func TestLacksOnly(t *testing.T) {
	want := `{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"memcached","args":["-m","64"],"lifecycle":{"stopSignal":"SIGUSR1"}}]}}}}`
	tests := map[string]struct {
		owned any
		want  bool
	}{
		"the stop signal dropped": {map[string]any{"spec": map[string]any{"replicas": 2, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "memcached", "args": []any{"-m", "64"}, "lifecycle": map[string]any{}}}}}}}, true},
		"replicas taken over by another manager": {map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "memcached", "args": []any{"-m", "64"}, "lifecycle": map[string]any{"stopSignal": "SIGUSR1"}}}}}}}, true},
		"a value changed":                  {map[string]any{"spec": map[string]any{"replicas": 3}}, false},
		"an owned field no longer desired": {map[string]any{"spec": map[string]any{"replicas": 2, "paused": true}}, false},
		"a list of another length": {map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "memcached", "args": []any{"-m"}}}}}}}, false},
		"nothing owned": {nil, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := lacksOnly([]byte(want), tt.owned)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("lacksOnly = %v, want %v", got, tt.want)
			}
		})
	}
}

// A dry run's answer differs from the cached object in what no apply
// changes: the times of the managed fields, the status, the type.
func TestStoredFieldsIgnoreWhatAnApplyNeverChanges(t *testing.T) {
	live := deploymentOwning(`{"f:spec":{"f:replicas":{}}}`, func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](2)
		d.Status.ReadyReplicas = 1
		d.ManagedFields[1].Time = &metav1.Time{Time: time.Unix(100, 0)}
	})
	answer := live.DeepCopy()
	answer.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	answer.Status.ReadyReplicas = 2
	answer.ManagedFields[1].Time = &metav1.Time{Time: time.Unix(200, 0)}
	a, err := storedFields(live)
	if err != nil {
		t.Fatal(err)
	}
	b, err := storedFields(answer)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(a, b) {
		t.Fatalf("the answer differs:\n%v\n%v", a, b)
	}
	answer.Spec.Replicas = ptr.To[int32](3)
	if b, _ = storedFields(answer); equality.Semantic.DeepEqual(a, b) {
		t.Fatal("a changed replicas went unnoticed")
	}
}
