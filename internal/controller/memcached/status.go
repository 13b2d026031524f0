package memcached

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// observation is what one reconcile saw and did: the input of the status.
type observation struct {
	// generation is the generation of the spec the reconcile acted on. The
	// status reports it even when it is written onto a fresher copy of a
	// newer generation: that one gets its own reconcile.
	generation int64
	// size is the resolved spec.size.
	size int32
	// deployment is the live Deployment owned by the Memcached (after the
	// apply, when there was one); nil when it does not exist (yet) or is
	// foreign.
	deployment *appsv1.Deployment
	// serviceName is set when the headless Service exists and is owned.
	serviceName string
	// servers are the ready host:port endpoints of the Service.
	servers []string
	// foreign lists same-named objects owned by someone else, e.g.
	// "Deployment shop/cache".
	foreign []string
	// invalid is a spec the controller refuses to run.
	invalid error
	// applyErr is an apiserver error while applying the owned objects.
	applyErr error
	// serviceMonitorUnsupported: a ServiceMonitor is wanted but the
	// cluster does not serve the kind.
	serviceMonitorUnsupported bool
	// created lists the kinds created in this reconcile, for one event.
	created []string
}

// writeStatus writes the status computed from obs when it differs from the
// stored one. mc may come from a cache that has not seen this controller's
// previous status write; the writer then computes on a fresh read, so no
// field is left at a value the cache no longer shows. Warning events go out
// on the transition into a problem, not on every reconcile.
func (r *Reconciler) writeStatus(ctx context.Context, mc *cachev1alpha1.Memcached, obs observation) error {
	var before []metav1.Condition
	written, err := r.Status.Update(ctx, mc, func() error {
		before = mc.Status.Conditions
		mc.Status = computeStatus(mc, obs, r.Clock.Now())
		return nil
	})
	if err != nil || !written {
		return err
	}
	r.reportDegraded(mc, before)
	st := &mc.Status
	log.FromContext(ctx).V(1).Info("status updated", "replicas", st.Replicas, "ready", st.ReadyReplicas, "servers", len(st.Servers))
	return nil
}

// computeStatus derives the whole status from the observation and mc's
// current conditions. It is a pure function of its inputs: the conditions'
// transition times change only when a condition's status does.
func computeStatus(mc *cachev1alpha1.Memcached, obs observation, now time.Time) cachev1alpha1.MemcachedStatus {
	st := cachev1alpha1.MemcachedStatus{
		ObservedGeneration: obs.generation,
		Selector:           selectorString(mc),
		ServiceName:        obs.serviceName,
		Servers:            obs.servers,
		Conditions:         slices.Clone(mc.Status.Conditions),
	}
	if d := obs.deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	conds := status.NewConditions(&st.Conditions, obs.generation, now)
	trouble := rolloutTroubleOf(obs.deployment)
	setDegraded(conds, obs, trouble)
	setAvailable(conds, obs.deployment, obs.size)
	setProgressing(conds, obs, trouble)
	return st
}

// rolloutTrouble is what the Deployment's own conditions say is wrong.
type rolloutTrouble struct {
	// progressDeadline: the rollout exceeded progressDeadlineSeconds.
	progressDeadline *appsv1.DeploymentCondition
	// replicaFailure: pods cannot be created (e.g. quota).
	replicaFailure *appsv1.DeploymentCondition
}

func rolloutTroubleOf(d *appsv1.Deployment) rolloutTrouble {
	var t rolloutTrouble
	if d == nil {
		return t
	}
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" && c.Status == corev1.ConditionFalse {
			t.progressDeadline = c
		}
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			t.replicaFailure = c
		}
	}
	return t
}

// setDegraded: the first problem that needs a human wins.
func setDegraded(conds status.Conditions, obs observation, trouble rolloutTrouble) {
	const typ = cachev1alpha1.ConditionDegraded
	switch {
	case obs.invalid != nil:
		conds.True(typ, cachev1alpha1.ReasonInvalidSpec, obs.invalid.Error())
	case len(obs.foreign) > 0:
		conds.True(typ, cachev1alpha1.ReasonForeignObject,
			fmt.Sprintf("%s already exist(s) and is not controlled by this Memcached; the controller leaves it alone. Delete or rename it, or rename this Memcached",
				strings.Join(obs.foreign, ", ")))
	case obs.applyErr != nil:
		conds.True(typ, cachev1alpha1.ReasonApplyFailed, obs.applyErr.Error())
	case trouble.progressDeadline != nil:
		conds.True(typ, cachev1alpha1.ReasonRolloutStuck, trouble.progressDeadline.Message)
	case trouble.replicaFailure != nil:
		conds.True(typ, cachev1alpha1.ReasonReplicaFailure, trouble.replicaFailure.Message)
	case obs.serviceMonitorUnsupported:
		conds.True(typ, cachev1alpha1.ReasonServiceMonitorUnsupported,
			"exporter.serviceMonitor is enabled but the cluster has no monitoring.coreos.com/v1 ServiceMonitor kind; install prometheus-operator or disable it (the exporter itself runs)")
	default:
		conds.False(typ, cachev1alpha1.ReasonAsExpected, "The owned objects match the spec")
	}
}

// setAvailable: every requested instance ready for minReadySeconds.
func setAvailable(conds status.Conditions, d *appsv1.Deployment, size int32) {
	const typ = cachev1alpha1.ConditionAvailable
	switch {
	case d == nil:
		conds.False(typ, cachev1alpha1.ReasonDeploymentMissing, "The Deployment of this Memcached does not exist")
	case size == 0:
		conds.False(typ, cachev1alpha1.ReasonParked, "size is 0: no instance runs")
	case d.Status.AvailableReplicas >= size:
		conds.True(typ, cachev1alpha1.ReasonAllInstancesAvailable, fmt.Sprintf("%d/%d instances available", size, size))
	default:
		conds.False(typ, cachev1alpha1.ReasonInstancesUnavailable, fmt.Sprintf("%d/%d instances available", d.Status.AvailableReplicas, size))
	}
}

// setProgressing: the Deployment has not reached the desired state yet.
func setProgressing(conds status.Conditions, obs observation, trouble rolloutTrouble) {
	const typ = cachev1alpha1.ConditionProgressing
	d, size := obs.deployment, obs.size
	switch {
	case d == nil || obs.invalid != nil:
		conds.False(typ, cachev1alpha1.ReasonBlocked, "The controller cannot apply the spec; see the Degraded condition")
	case trouble.progressDeadline != nil:
		conds.False(typ, cachev1alpha1.ReasonProgressDeadlineExceeded, trouble.progressDeadline.Message)
	case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < size:
		if d.Status.Replicas < size {
			conds.True(typ, cachev1alpha1.ReasonScalingUp, fmt.Sprintf("%d of %d instances exist", d.Status.Replicas, size))
		} else {
			conds.True(typ, cachev1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d instances run the current configuration", d.Status.UpdatedReplicas, size))
		}
	case d.Status.Replicas > size:
		conds.True(typ, cachev1alpha1.ReasonScalingDown, fmt.Sprintf("%d instances exist, %d wanted", d.Status.Replicas, size))
	case d.Status.AvailableReplicas < size:
		conds.True(typ, cachev1alpha1.ReasonWaitingForReadiness, fmt.Sprintf("%d of %d instances available", d.Status.AvailableReplicas, size))
	case size == 0:
		conds.False(typ, cachev1alpha1.ReasonParked, "size is 0: no instance runs")
	default:
		conds.False(typ, cachev1alpha1.ReasonRolloutComplete, fmt.Sprintf("%d instances run the current configuration", size))
	}
}
