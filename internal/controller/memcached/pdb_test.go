package memcached

import (
	"context"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func TestDesiredPDB(t *testing.T) {
	mc, s := withExporter(t)
	pdb, err := convertInto(desiredPDB(mc, s), &policyv1.PodDisruptionBudget{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels[labelInstance] != "sessions" ||
		*pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow || len(pdb.OwnerReferences) != 1 {
		t.Errorf("pdb = %+v", pdb)
	}
}

// The disruption controller writes a PDB's status, so the cached copy is
// often behind by a resourceVersion when the PDB is to be deleted (size
// down to 1): the delete must not fail the reconcile on that conflict, and
// it must still delete only a PDB that is ours.
func TestDeletePDBLooksAgainAfterAConflict(t *testing.T) {
	tests := []struct {
		name        string
		disown      bool
		wantDeleted bool
	}{
		{name: "the cache is behind the disruption controller's status write", wantDeleted: true},
		{name: "someone took the PDB over meanwhile", disown: true, wantDeleted: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", UID: "uid-1"}}
			owned := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: mc.Name,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mc, cachev1alpha1.GroupVersion.WithKind("Memcached"))}}}
			lc := newLaggingCache(t, owned)
			seen := &policyv1.PodDisruptionBudget{}
			if err := lc.server.Get(ctx, client.ObjectKeyFromObject(owned), seen); err != nil {
				t.Fatal(err)
			}
			live := seen.DeepCopy()
			live.Status.DisruptionsAllowed = 1
			if tt.disown {
				live.OwnerReferences = nil
			}
			if err := lc.server.Update(ctx, live); err != nil {
				t.Fatal(err)
			}
			r := lc.newReconciler(clocktesting.NewFakePassiveClock(time.Now()), events.NewFakeRecorder(10))
			r.APIReader = lc.server

			if err := r.deletePDB(ctx, mc, seen, &observation{}); err != nil {
				t.Fatalf("deletePDB with a stale copy: %v", err)
			}
			err := lc.server.Get(ctx, client.ObjectKeyFromObject(owned), &policyv1.PodDisruptionBudget{})
			if deleted := apierrors.IsNotFound(err); deleted != tt.wantDeleted {
				t.Errorf("deleted = %v (%v), want %v", deleted, err, tt.wantDeleted)
			}
		})
	}
}
