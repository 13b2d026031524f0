package nsscaler

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// maxGitOpsListed bounds status.gitOps.paused; maxGitOpsNamespaces the
// namespaces listed per object.
const (
	maxGitOpsListed     = 20
	maxGitOpsNamespaces = 10
)

// gitOpsObservation is what the GitOps pass saw and did.
type gitOpsObservation struct {
	// enabled: spec.gitOps enables a tool.
	enabled bool
	// held are the objects this NSScaler holds paused after the pass, with
	// the parked namespaces they manage.
	held           []heldObject
	pausedByOthers int32
	unverified     int32
	// missing are enabled kinds whose CRD is not installed.
	missing []*gitOpsKind
	errs    []error
	// paused and resumed are this pass's writes (events); repaused the
	// objects someone resumed while parked, paused again.
	paused, resumed, repaused []gitOpsRef
}

// heldObject is a GitOps object this NSScaler holds paused.
type heldObject struct {
	ref        gitOpsRef
	namespaces sets.Set[string]
}

// relevant: the status reports the GitOps pause.
func (o *gitOpsObservation) relevant() bool {
	return o.enabled || len(o.held) > 0 || len(o.errs) > 0
}

// gitOpsStatus is status.gitOps; nil when not relevant.
func gitOpsStatus(o *gitOpsObservation) *scalingv1alpha1.GitOpsStatus {
	if !o.relevant() {
		return nil
	}
	st := &scalingv1alpha1.GitOpsStatus{
		PausedCount: int32(len(o.held)), PausedByOthers: o.pausedByOthers, Unverified: o.unverified,
	}
	for i, h := range o.held {
		if i == maxGitOpsListed {
			break
		}
		ns := sets.List(h.namespaces)
		if len(ns) > maxGitOpsNamespaces {
			ns = ns[:maxGitOpsNamespaces]
		}
		st.Paused = append(st.Paused, scalingv1alpha1.GitOpsObject{
			Kind: h.ref.kind.kind, Namespace: h.ref.key.Namespace, Name: h.ref.key.Name, ParkedNamespaces: ns,
		})
	}
	return st
}

// setGitOpsPaused sets (or, when not relevant, removes) the GitOpsPaused
// condition.
func setGitOpsPaused(list *[]metav1.Condition, c status.Conditions, o *gitOpsObservation) {
	if !o.relevant() {
		meta.RemoveStatusCondition(list, scalingv1alpha1.ConditionGitOpsPaused)
		return
	}
	missing := ""
	if len(o.missing) > 0 {
		names := make([]string, 0, len(o.missing))
		for _, k := range o.missing {
			names = append(names, fmt.Sprintf("%s (%s)", k.kind, k.gvk.GroupVersion()))
		}
		missing = "not installed, not looked for: " + strings.Join(names, ", ")
	}
	switch {
	case len(o.errs) > 0:
		c.False(scalingv1alpha1.ConditionGitOpsPaused, scalingv1alpha1.ReasonGitOpsWriteFailed,
			fmt.Sprintf("%d GitOps objects could not be read or written; retrying: %s", len(o.errs), joinErrors(o.errs)))
	case len(o.held) > 0:
		msg := fmt.Sprintf("%d GitOps objects paused while the namespaces they manage are parked", len(o.held))
		if missing != "" {
			msg += "; " + missing
		}
		c.True(scalingv1alpha1.ConditionGitOpsPaused, scalingv1alpha1.ReasonGitOpsObjectsPaused, msg)
	case missing != "":
		c.False(scalingv1alpha1.ConditionGitOpsPaused, scalingv1alpha1.ReasonGitOpsKindMissing, missing)
	default:
		c.False(scalingv1alpha1.ConditionGitOpsPaused, scalingv1alpha1.ReasonGitOpsNothingToPause,
			"no GitOps object that manages a parked namespace needs pausing")
	}
}

// joinErrors lists the first maxMessageErrors errors.
func joinErrors(errs []error) string {
	parts := make([]string, 0, maxMessageErrors)
	for i, err := range errs {
		if i == maxMessageErrors {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "; ")
}

// emitGitOpsEvents records what the pass paused and resumed, and its
// failures: one event per reason and reconcile.
func (r *Reconciler) emitGitOpsEvents(scaler *scalingv1alpha1.NSScaler, ev *status.Batch, o *gitOpsObservation) {
	if len(o.paused) > 0 {
		ev.Normal(scaler, nil, scalingv1alpha1.EventGitOpsPaused, "Park",
			"paused %s while the namespaces they manage are parked", refsPhrase(o.paused))
	}
	if len(o.resumed) > 0 {
		ev.Normal(scaler, nil, scalingv1alpha1.EventGitOpsResumed, "Restore",
			"gave %s back what they had before the park", refsPhrase(o.resumed))
	}
	if len(o.repaused) > 0 {
		ev.Warning(scaler, nil, scalingv1alpha1.EventGitOpsRepaused, "Park",
			"%s resumed while the namespaces they manage are parked: paused again, what they had before the park still recorded", refsPhrase(o.repaused))
	}
	if len(o.errs) > 0 {
		ev.Warning(scaler, nil, scalingv1alpha1.EventGitOpsFailed, "Reconcile", "%s", joinErrors(o.errs))
	}
}

// refsPhrase names up to maxNamespaceEvents objects.
func refsPhrase(refs []gitOpsRef) string {
	parts := make([]string, 0, min(len(refs), maxNamespaceEvents)+1)
	for i, ref := range refs {
		if i == maxNamespaceEvents {
			parts = append(parts, fmt.Sprintf("and %d more", len(refs)-i))
			break
		}
		parts = append(parts, ref.String())
	}
	return strings.Join(parts, ", ")
}

// gitOpsPausedByKind counts the held objects per kind (the metric).
func gitOpsPausedByKind(o *gitOpsObservation) map[string]int {
	n := map[string]int{}
	for _, k := range gitOpsKinds {
		n[k.kind] = 0
	}
	for _, h := range o.held {
		n[h.ref.kind.kind]++
	}
	return n
}
