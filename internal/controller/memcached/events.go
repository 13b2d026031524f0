package memcached

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// warningFor is the Warning event of a Degraded reason that gets one, on
// the transition only: both need a human, and repeating them on every
// reconcile would bury everything else.
func warningFor(degradedReason string) (string, bool) {
	switch degradedReason {
	case cachev1alpha1.ReasonForeignObject:
		return cachev1alpha1.EventForeignObject, true
	case cachev1alpha1.ReasonInvalidSpec:
		return cachev1alpha1.EventInvalidSpec, true
	case cachev1alpha1.ReasonSecretNotUsable:
		return cachev1alpha1.EventSecretNotUsable, true
	case cachev1alpha1.ReasonIssuerNotAllowed, cachev1alpha1.ReasonDNSNameNotAllowed,
		cachev1alpha1.ReasonCertManagerNotInstalled, cachev1alpha1.ReasonCertificateSecretConflict:
		// Issuance refused or impossible (certificate.go): the reason is
		// the event's.
		return degradedReason, true
	}
	return "", false
}

// eventForApply records a creation (reported in one event per reconcile
// by reportCreated) or emits DriftCorrected for an update.
func (r *Reconciler) eventForApply(mc *cachev1alpha1.Memcached, obs *observation, kind string, created, applied bool) {
	switch {
	case !applied:
	case created:
		obs.created = append(obs.created, kind)
	default:
		obs.events.Normal(mc, nil, cachev1alpha1.EventDriftCorrected, "Update", "Restored the fields of %s %s that differ from the spec", kind, mc.Name)
	}
}

// reportCreated emits one Created event for everything created in this
// reconcile (an event is an apiserver write too).
func (r *Reconciler) reportCreated(mc *cachev1alpha1.Memcached, obs *observation) {
	if len(obs.created) == 0 {
		return
	}
	obs.events.Normal(mc, nil, cachev1alpha1.EventCreated, "Create", "Created %s (all named %s)", strings.Join(obs.created, ", "), mc.Name)
	obs.created = nil
}

// reportDegraded emits the Warning of a Degraded condition that has just
// changed to a reason with one (before: the conditions the new status
// replaced).
func (r *Reconciler) reportDegraded(mc *cachev1alpha1.Memcached, obs *observation, before []metav1.Condition) {
	if !status.Changed(before, mc.Status.Conditions, cachev1alpha1.ConditionDegraded) {
		return
	}
	after := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)
	if after.Status == metav1.ConditionTrue {
		r.Metrics.degradedTo(after.Reason)
	}
	if reason, ok := warningFor(after.Reason); ok && after.Status == metav1.ConditionTrue {
		obs.events.Warning(mc, nil, reason, "Reconcile", "%s", after.Message)
	}
}
