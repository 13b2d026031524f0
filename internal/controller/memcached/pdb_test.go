package memcached

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
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
