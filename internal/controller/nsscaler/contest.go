package nsscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// contestedWorkload is a workload the controller has stopped re-parking.
type contestedWorkload struct {
	w       Workload
	manager string
	retryAt time.Time
}

// contested handles a parked workload someone un-parked (it carries its
// recorded original but is above spec.parkedReplicas, resumed or
// un-paused, and would be re-parked): it reports whether the
// controller leaves it alone for now. A scale-up is re-parked unless it
// makes the workload contested (FightPolicy) or the workload is in a
// back-off; a workload becoming contested is attributed to the field
// manager that wrote its replicas (read from managedFields, which the
// cache does not keep) and announced with a Warning event.
func (p *workloadPass) contested(ctx context.Context, r *Reconciler, scaler *scalingv1alpha1.NSScaler, h kindHandler, w Workload) bool {
	if !p.act || !w.HasAnnotation || !w.unparked(p.plan.ParkedReplicas) || !isTarget(w, p.plan, p.kinds) {
		return false
	}
	if d, err := Decide(w, p.plan, p.kinds, p.self); err != nil || d.Action != ActionPark {
		return false
	}
	if retryAt, manager, holding := p.fights.holding(w.UID, p.now); holding {
		p.holdContested(w, manager, retryAt)
		return true
	}
	if p.parkedReplicasChanged {
		return false
	}
	retryAt, contested := p.fights.scaledUp(w.UID, p.now)
	if !contested {
		return false
	}
	manager := r.unparkedBy(ctx, h, w)
	p.fights.blame(w.UID, manager)
	p.holdContested(w, manager, retryAt)
	p.obs.newlyContested++
	if p.obs.newlyContested <= maxNamespaceEvents {
		p.obs.events.Warning(scaler, nil, scalingv1alpha1.EventWorkloadContested, "Park",
			"%s was scaled up %d times within %s, last by field manager %q: not re-parked until %s",
			workloadRef(w), r.fightPolicy.Threshold, r.fightPolicy.Window, manager, retryAt.UTC().Format(time.RFC3339))
	}
	log.FromContext(ctx).Info("workload contested", "workload", workloadRef(w), "manager", manager, "retryAt", retryAt)
	return true
}

// holdContested counts a contested workload and arranges the reconcile
// that ends its back-off.
func (p *workloadPass) holdContested(w Workload, manager string, retryAt time.Time) {
	// Still a target: its fight is remembered.
	p.targets[w.UID] = struct{}{}
	p.obs.contested = append(p.obs.contested, contestedWorkload{w: w, manager: manager, retryAt: retryAt})
	p.obs.wakeAt(retryAt)
	p.count(w, Decision{Target: true}, false)
}

// unknownManager names a scale-up whose writer managedFields do not tell.
const unknownManager = "unknown"

// unparkedBy reads the workload's managedFields from the apiserver (one
// metadata-only GET, only when a workload becomes contested) and returns
// the field manager other than this controller that owns the field the
// park sets — or, when no one owns it any more (an annotation removed),
// the other manager that wrote last.
func (r *Reconciler) unparkedBy(ctx context.Context, h kindHandler, w Workload) string {
	if r.apiReader == nil {
		return unknownManager
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(h.objectKind())
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, obj); err != nil {
		return unknownManager
	}
	return managerOf(obj.ManagedFields, parkedField(w.Kind), FieldManager)
}

// parkedField is the field path, in managedFields terms, that a park sets.
func parkedField(k KindKey) []string {
	switch {
	case k.suspends():
		return []string{"f:spec", "f:suspend"}
	case k.pauses():
		return []string{"f:metadata", "f:annotations", "f:" + AnnotationKEDAPausedReplicas}
	}
	return []string{"f:spec", "f:replicas"}
}

// managerOf picks, among entries of managers other than self, the latest
// that owns field, else the latest of all.
func managerOf(entries []metav1.ManagedFieldsEntry, field []string, self string) string {
	var owner, latest *metav1.ManagedFieldsEntry
	later := func(a, b *metav1.ManagedFieldsEntry) bool {
		return b == nil || (a.Time != nil && (b.Time == nil || !a.Time.Before(b.Time)))
	}
	for i := range entries {
		e := &entries[i]
		if e.Manager == self {
			continue
		}
		if later(e, latest) {
			latest = e
		}
		if ownsField(e, field) && later(e, owner) {
			owner = e
		}
	}
	switch {
	case owner != nil:
		return owner.Manager
	case latest != nil:
		return latest.Manager
	}
	return unknownManager
}

// ownsField reports whether the entry's FieldsV1 contains the path.
func ownsField(e *metav1.ManagedFieldsEntry, path []string) bool {
	if e.FieldsV1 == nil {
		return false
	}
	var node map[string]any
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &node); err != nil {
		return false
	}
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// contestedMessage says who contests which workloads, for the condition.
func contestedMessage(c []contestedWorkload) string {
	msg := fmt.Sprintf("%d workloads are scaled up by other field managers and not re-parked until their back-off ends", len(c))
	for i, cw := range c {
		if i == maxMessageErrors {
			msg += fmt.Sprintf("; and %d more", len(c)-i)
			break
		}
		msg += fmt.Sprintf("; %s by %q until %s", workloadRef(cw.w), cw.manager, cw.retryAt.UTC().Format(time.RFC3339))
	}
	return msg
}
