package rebootpolicy

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// targetInfo is what the restart decision needs to know about a workload.
type targetInfo struct {
	obj  client.Object
	kind autorebootv1alpha1.TargetKind
	// paused: a paused Deployment; onDelete: an OnDelete StatefulSet or
	// DaemonSet. Neither can be restarted by a template change.
	paused   bool
	onDelete bool
	// progressing: the previous rollout is still in progress (see
	// rolloutPhase.inProgress).
	progressing bool
	// stampInFuture: the restartedAt annotation names a time after now (set
	// by hand); it is ignored for the cooldown and reported.
	stampInFuture bool
	// restartedAt is the target's last restart by this group (zero: never).
	restartedAt time.Time
	// restartID names the trigger of that restart (see restartID).
	restartID string
}

// resolveTargets returns the target workloads of rbp, from the cache.
func (r *Reconciler) resolveTargets(ctx context.Context, rbp *autorebootv1alpha1.RebootPolicy, now time.Time) ([]targetInfo, error) {
	t := rbp.Spec.Target
	if t.Name != "" {
		return r.namedTarget(ctx, rbp.Namespace, t, now)
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Selector.LabelSelector())
	if err != nil {
		return nil, &status.InvalidSpecError{Msg: "target.selector: " + err.Error()}
	}
	list := newTargetList(t.Kind)
	if list == nil {
		return nil, fmt.Errorf("unsupported target kind %q", t.Kind)
	}
	if err := r.targetReader(t.Kind).List(ctx, list, client.InNamespace(rbp.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", t.Kind, rbp.Namespace, err)
	}
	var out []targetInfo
	err = meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, inspectTarget(o.(client.Object), now, r.Throttle.rolloutStalls()))
		return nil
	})
	return out, err
}

func (r *Reconciler) namedTarget(ctx context.Context, ns string, t autorebootv1alpha1.TargetRef, now time.Time) ([]targetInfo, error) {
	obj := newTargetObject(t.Kind)
	if obj == nil {
		return nil, fmt.Errorf("unsupported target kind %q", t.Kind)
	}
	if err := r.targetReader(t.Kind).Get(ctx, types.NamespacedName{Namespace: ns, Name: t.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s/%s: %w", t.Kind, ns, t.Name, err)
	}
	return []targetInfo{inspectTarget(obj, now, r.Throttle.rolloutStalls())}, nil
}

func newTargetList(kind autorebootv1alpha1.TargetKind) client.ObjectList {
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		return &appsv1.DeploymentList{}
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSetList{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSetList{}
	case autorebootv1alpha1.KindRollout:
		return newRolloutList()
	}
	return nil
}

func newTargetObject(kind autorebootv1alpha1.TargetKind) client.Object {
	switch kind {
	case autorebootv1alpha1.KindDeployment:
		return &appsv1.Deployment{}
	case autorebootv1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}
	case autorebootv1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}
	case autorebootv1alpha1.KindRollout:
		return newRolloutObject()
	}
	return nil
}

// inspectTarget reads the restart-relevant facts of a workload. Only a
// rollout in progress (the controller has not seen the latest spec, or not
// every replica runs the latest template yet, and it has not got stuck)
// defers a restart: a target whose pods are unavailable or crash-looping,
// or whose rollout is stuck, is exactly what a probe trigger is for.
// stalls is the throttle's stall tracker (nil: no StatefulSet or
// DaemonSet counts as stuck).
func inspectTarget(obj client.Object, now time.Time, stalls *stallTracker) targetInfo {
	v, ok := viewOf(obj)
	ti := targetInfo{obj: obj, kind: v.kind, paused: v.paused, onDelete: v.onDelete}
	ti.progressing = v.phase(ok, obj.GetGeneration(), stalls.stalled(obj, v, now)).inProgress()
	ti.restartID = obj.GetAnnotations()[autorebootv1alpha1.RestartIDAnnotation]
	if stamp := v.stamp; stamp != "" {
		if t, err := time.Parse(time.RFC3339, stamp); err == nil {
			ti.restartedAt = t
		}
		// A stamp in the future would hold the cooldown (and count as a
		// restart after any trigger) until that time: ignore it.
		if ti.restartedAt.After(now.Add(clockSkew)) {
			ti.restartedAt, ti.stampInFuture = time.Time{}, true
		}
	}
	return ti
}

// restartStamp is the target's restartedAt stamp (zero: none or
// unreadable).
func (v workloadView) restartStamp() time.Time {
	t, err := time.Parse(time.RFC3339, v.stamp)
	if err != nil {
		return time.Time{}
	}
	return t
}

// clockSkew is how far a restartedAt stamp may lie ahead of this manager's
// clock before it counts as set in the future (another replica's clock).
const clockSkew = 5 * time.Second

// targetIndex indexes RebootPolicies by "<kind>/<name>" of their target, or
// "<kind>/*" for selector targets, so a workload event looks up only the
// policies that may target it instead of every policy in the namespace.
const targetIndex = "autoreboot.runbook.dev/target"

func targetIndexValue(rbp *autorebootv1alpha1.RebootPolicy) []string {
	t := rbp.Spec.Target
	if t.Name != "" {
		return []string{string(t.Kind) + "/" + t.Name}
	}
	return []string{string(t.Kind) + "/*"}
}

// targetDecisionChanged passes the workload updates that can change a
// restart decision or a condition: spec (generation), labels (selector
// membership), annotations (the restart id), deletion, and the end or start
// of a rollout. The workload controller writes a restarted Deployment's
// status several times while its pods roll (replicas, ready, available);
// each of those would otherwise reconcile every policy targeting it, and in
// a burst of restarts those reconciles wait for the same CPU as the
// restarts still due. A restart's end for the throttle is watched by the
// throttle itself.
func targetDecisionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if o == nil || n == nil {
			return true
		}
		if o.GetGeneration() != n.GetGeneration() || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
			return true
		}
		return rolloutPhaseOf(o).inProgress() != rolloutPhaseOf(n).inProgress()
	}}
}

// policiesForTarget maps a workload event to the RebootPolicies in its
// namespace that target it.
func (r *Reconciler) policiesForTarget(kind autorebootv1alpha1.TargetKind) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var out []reconcile.Request
		var byName autorebootv1alpha1.RebootPolicyList
		if err := r.Client.List(ctx, &byName, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{targetIndex: string(kind) + "/" + obj.GetName()}); err == nil {
			for i := range byName.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&byName.Items[i])})
			}
		}
		var bySelector autorebootv1alpha1.RebootPolicyList
		if err := r.Client.List(ctx, &bySelector, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{targetIndex: string(kind) + "/*"}); err == nil {
			for i := range bySelector.Items {
				sel, err := metav1.LabelSelectorAsSelector(bySelector.Items[i].Spec.Target.Selector.LabelSelector())
				if err == nil && sel.Matches(labels.Set(obj.GetLabels())) {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&bySelector.Items[i])})
				}
			}
		}
		for _, req := range out {
			// A target changed: its template may reference other objects
			// now (a relabelled workload may have joined a selector).
			r.References.WakePolicy(req.NamespacedName)
		}
		return out
	}
}
