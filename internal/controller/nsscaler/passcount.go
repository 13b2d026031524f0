package nsscaler

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// countDryRun counts what a DryRun NSScaler would write.
func (p *workloadPass) countDryRun(w Workload, a Action) {
	if a == ActionNone {
		return
	}
	t := p.dryTallies[w.Namespace]
	if t == nil {
		t = &namespaceTally{}
		p.dryTallies[w.Namespace] = t
	}
	if a == ActionPark {
		p.obs.wouldPark++
		t.parked++
	} else {
		p.obs.wouldRestore++
		t.restored++
	}
}

// count adds a workload's final state to the status counters. settled is
// true when the workload is in the state its decision wants.
func (p *workloadPass) count(w Workload, d Decision, settled bool) {
	p.countFinal(w.Kind, d.Target, d.Action, settled, d.Keep)
	if settled {
		p.obs.addSaved(w.Namespace, p.savedRate(w, d))
	}
}

// countFinal is count of a workload of kind whose decision was target and
// action; a settled target keeps keep replicas.
func (p *workloadPass) countFinal(kind KindKey, target bool, action Action, settled bool, keep int32) {
	if target {
		if settled {
			p.obs.parkedWorkloads++
			p.obs.keptPods += keep
		} else {
			p.obs.pendingTargets++
		}
	}
	// A custom kind stays watched while it has objects this NSScaler holds
	// parked or still has to restore.
	if kind.Group != "" && (target || action == ActionRestore) {
		p.parkedKinds.Insert(kind)
	}
}

// tally counts the written jobs into the status and, per namespace, for its
// events.
func (p *workloadPass) tally(outcomes []outcome) map[string]*namespaceTally {
	tallies := map[string]*namespaceTally{}
	for _, o := range outcomes {
		t := tallies[o.namespace]
		if t == nil {
			t = &namespaceTally{}
			tallies[o.namespace] = t
		}
		switch {
		case o.err != nil:
			t.failed++
			if t.firstErr == nil {
				t.firstErr = o.err
			}
			p.obs.workloadErrs = append(p.obs.workloadErrs, o.err)
			p.countFinal(o.kind, o.target, o.action, false, o.keep)
		case o.done == ActionPark:
			t.parked++
			p.countFinal(o.kind, o.target, o.action, true, o.keep)
			p.obs.addSaved(o.namespace, o.saved)
		case o.done == ActionRestore:
			t.restored++
		default:
			p.countFinal(o.kind, o.target, o.action, true, o.keep)
			p.obs.addSaved(o.namespace, o.saved)
		}
	}
	return tallies
}

// workloadKinds lists kinds as status.parkedKinds does: sorted by group,
// then kind.
func workloadKinds(kinds sets.Set[KindKey]) []scalingv1alpha1.WorkloadKind {
	var out []scalingv1alpha1.WorkloadKind
	for k := range kinds {
		out = append(out, scalingv1alpha1.WorkloadKind{Group: k.Group, Kind: k.Kind})
	}
	slices.SortFunc(out, func(a, b scalingv1alpha1.WorkloadKind) int {
		return cmp.Compare(a.Group+"/"+a.Kind, b.Group+"/"+b.Kind)
	})
	return out
}
