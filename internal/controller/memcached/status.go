package memcached

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// Condition reasons. Available and Progressing describe the instances,
// Degraded says why the controller cannot make progress on its own.
const (
	ReasonAllInstancesAvailable = "AllInstancesAvailable"
	ReasonInstancesUnavailable  = "InstancesUnavailable"
	ReasonParked                = "Parked"
	ReasonDeploymentMissing     = "DeploymentMissing"

	ReasonRolloutComplete          = "RolloutComplete"
	ReasonScalingUp                = "ScalingUp"
	ReasonScalingDown              = "ScalingDown"
	ReasonRollingOut               = "RollingOut"
	ReasonWaitingForReadiness      = "WaitingForReadiness"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonBlocked                  = "Blocked"

	ReasonAsExpected     = "AsExpected"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonForeignObject  = "ForeignObject"
	ReasonApplyFailed    = "ApplyFailed"
	ReasonRolloutStuck   = "RolloutStuck"
	ReasonReplicaFailure = "ReplicaFailure"
)

// observation is what one reconcile saw and did: the input of the status.
type observation struct {
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

// computeStatus derives the whole status from the observation. It is a pure
// function of its inputs: the conditions' transition times change only when
// a condition's status does.
func computeStatus(mc *cachev1alpha1.Memcached, size int32, obs observation, now time.Time) cachev1alpha1.MemcachedStatus {
	st := cachev1alpha1.MemcachedStatus{
		ObservedGeneration: mc.Generation,
		Selector:           selectorString(mc),
		ServiceName:        obs.serviceName,
		Servers:            obs.servers,
		Conditions:         append([]metav1.Condition(nil), mc.Status.Conditions...),
	}
	d := obs.deployment
	if d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: mc.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}

	// Degraded: the first problem that needs a human wins.
	var progressDeadline, replicaFailure *appsv1.DeploymentCondition
	if d != nil {
		for i := range d.Status.Conditions {
			c := &d.Status.Conditions[i]
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" && c.Status == corev1.ConditionFalse {
				progressDeadline = c
			}
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				replicaFailure = c
			}
		}
	}
	switch {
	case obs.invalid != nil:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonInvalidSpec, obs.invalid.Error())
	case len(obs.foreign) > 0:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonForeignObject,
			fmt.Sprintf("%s already exist(s) and is not controlled by this Memcached; the controller leaves it alone. Delete or rename it, or rename this Memcached",
				strings.Join(obs.foreign, ", ")))
	case obs.applyErr != nil:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonApplyFailed, obs.applyErr.Error())
	case progressDeadline != nil:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonRolloutStuck, progressDeadline.Message)
	case replicaFailure != nil:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonReplicaFailure, replicaFailure.Message)
	case obs.serviceMonitorUnsupported:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonServiceMonitorUnsupported,
			"exporter.serviceMonitor is enabled but the cluster has no monitoring.coreos.com/v1 ServiceMonitor kind; install prometheus-operator or disable it (the exporter itself runs)")
	default:
		set(cachev1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "The owned objects match the spec")
	}

	// Available: every requested instance ready for minReadySeconds.
	switch {
	case d == nil:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonDeploymentMissing, "The Deployment of this Memcached does not exist")
	case size == 0:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonParked, "size is 0: no instance runs")
	case d.Status.AvailableReplicas >= size:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonAllInstancesAvailable,
			fmt.Sprintf("%d/%d instances available", size, size))
	default:
		set(cachev1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonInstancesUnavailable,
			fmt.Sprintf("%d/%d instances available", d.Status.AvailableReplicas, size))
	}

	// Progressing: the Deployment has not reached the desired state yet.
	switch {
	case d == nil || obs.invalid != nil:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonBlocked, "The controller cannot apply the spec; see the Degraded condition")
	case progressDeadline != nil:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonProgressDeadlineExceeded, progressDeadline.Message)
	case d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < size:
		if d.Status.Replicas < size {
			set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonScalingUp,
				fmt.Sprintf("%d of %d instances exist", d.Status.Replicas, size))
		} else {
			set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut,
				fmt.Sprintf("%d of %d instances run the current configuration", d.Status.UpdatedReplicas, size))
		}
	case d.Status.Replicas > size:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonScalingDown,
			fmt.Sprintf("%d instances exist, %d wanted", d.Status.Replicas, size))
	case d.Status.AvailableReplicas < size:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonWaitingForReadiness,
			fmt.Sprintf("%d of %d instances available", d.Status.AvailableReplicas, size))
	case size == 0:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonParked, "size is 0: no instance runs")
	default:
		set(cachev1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete,
			fmt.Sprintf("%d instances run the current configuration", size))
	}
	return st
}
