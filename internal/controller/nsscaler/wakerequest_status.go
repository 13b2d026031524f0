package nsscaler

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=wakerequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=scaling.runbook.dev,resources=wakerequests/status,verbs=get;patch

// applyVerdict sets a request's status to v (conditions keep their
// transition time when unchanged).
func applyVerdict(r *scalingv1alpha1.WakeRequest, scaler string, v wakeVerdict, now time.Time) {
	st := &r.Status
	st.ObservedGeneration = r.Generation
	st.Phase = v.phase
	st.NSScaler = scaler
	st.GrantedAt, st.GrantedUntil = optionalTime(v.grantedAt), optionalTime(v.grantedUntil)
	c := status.NewConditions(&st.Conditions, r.Generation, now)
	if v.phase == scalingv1alpha1.WakeRequestGranted {
		c.True(scalingv1alpha1.ConditionGranted, v.reason, v.message)
		return
	}
	c.False(scalingv1alpha1.ConditionGranted, v.reason, v.message)
}

func optionalTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	st := statusTime(t)
	return &st
}

// writeWakeVerdict writes a request's new status with the version it was
// decided on as precondition: if it changed since (this controller decided
// it already and the cache is behind), the apiserver answers Conflict and
// the pass is retried on fresh data, so a request is never decided twice.
func writeWakeVerdict(ctx context.Context, c client.Client, r *scalingv1alpha1.WakeRequest, scaler string, v wakeVerdict, now time.Time) (*scalingv1alpha1.WakeRequest, error) {
	before := r
	after := r.DeepCopy()
	applyVerdict(after, scaler, v, now)
	err := c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	if err != nil {
		return nil, fmt.Errorf("writing the status of WakeRequest %s/%s: %w", r.Namespace, r.Name, err)
	}
	return after, nil
}

// reportWakeVerdict records the events and the metric of a written
// decision: on the request (related: the NSScaler) and on the NSScaler
// (related: the request), so both sides see it.
func (r *Reconciler) reportWakeVerdict(ev *status.Batch, req *scalingv1alpha1.WakeRequest, scaler *scalingv1alpha1.NSScaler, v wakeVerdict) {
	r.metrics.wakeRequests.WithLabelValues(v.reason).Inc()
	related := relatedObject(scaler)
	switch v.phase {
	case scalingv1alpha1.WakeRequestGranted:
		ev.Normal(req, related, scalingv1alpha1.EventWakeGranted, "Wake", "%s: %s", v.reason, v.message)
		if scaler != nil {
			ev.Normal(scaler, req, scalingv1alpha1.EventWakeGranted, "Wake", "namespace %s woken by WakeRequest %s until %s",
				req.Namespace, req.Name, v.grantedUntil.UTC().Format(time.RFC3339))
		}
	case scalingv1alpha1.WakeRequestRefused:
		ev.Warning(req, related, scalingv1alpha1.EventWakeRefused, "Wake", "%s: %s", v.reason, v.message)
		if scaler != nil {
			ev.Warning(scaler, req, scalingv1alpha1.EventWakeRefused, "Wake", "WakeRequest %s/%s refused: %s", req.Namespace, req.Name, v.reason)
		}
	case scalingv1alpha1.WakeRequestEnded:
		ev.Normal(req, related, scalingv1alpha1.EventWakeEnded, "Park", "%s: %s", v.reason, v.message)
		if scaler != nil {
			ev.Normal(scaler, req, scalingv1alpha1.EventWakeEnded, "Park", "the wake of namespace %s by WakeRequest %s ended: %s", req.Namespace, req.Name, v.reason)
		}
	}
}

// relatedObject keeps a typed nil pointer from becoming a non-nil
// interface (the recorder would dereference it).
func relatedObject(s *scalingv1alpha1.NSScaler) client.Object {
	if s == nil {
		return nil
	}
	return s
}
