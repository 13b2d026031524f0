package memcached

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

// workloadState is what the status needs to know of the owned workload,
// the same for a Deployment and a StatefulSet.
type workloadState struct {
	generation, observedGeneration int64
	replicas, ready, available     int32
	// updated instances run the current pod template.
	updated int32
	trouble rolloutTrouble
	// tls and auth: the current pod template's memcached requires them.
	tls, auth bool
}

// rolloutTrouble is what the Deployment's own conditions say is wrong (a
// StatefulSet has no such conditions).
type rolloutTrouble struct {
	// progressDeadline: the rollout exceeded progressDeadlineSeconds.
	progressDeadline *appsv1.DeploymentCondition
	// replicaFailure: pods cannot be created (e.g. quota).
	replicaFailure *appsv1.DeploymentCondition
}

func deploymentState(d *appsv1.Deployment) *workloadState {
	if d == nil {
		return nil
	}
	st := &workloadState{
		generation: d.Generation, observedGeneration: d.Status.ObservedGeneration,
		replicas: d.Status.Replicas, ready: d.Status.ReadyReplicas, available: d.Status.AvailableReplicas,
		updated: d.Status.UpdatedReplicas, trouble: rolloutTroubleOf(d),
	}
	st.tls, st.auth = templateSecurity(&d.Spec.Template)
	return st
}

func statefulSetState(s *appsv1.StatefulSet) *workloadState {
	if s == nil {
		return nil
	}
	st := &workloadState{
		generation: s.Generation, observedGeneration: s.Status.ObservedGeneration,
		replicas: s.Status.Replicas, ready: s.Status.ReadyReplicas, available: s.Status.AvailableReplicas,
		updated: s.Status.UpdatedReplicas,
	}
	st.tls, st.auth = templateSecurity(&s.Spec.Template)
	return st
}

func rolloutTroubleOf(d *appsv1.Deployment) rolloutTrouble {
	var t rolloutTrouble
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

// templateSecurity reads from the memcached container's command line
// whether TLS (-Z) and auth (-Y) are on. extraArgs can set neither, so the
// flags are the controller's own.
func templateSecurity(t *corev1.PodTemplateSpec) (tls, auth bool) {
	for _, c := range t.Spec.Containers {
		if c.Name == containerMemcached {
			return slices.Contains(c.Args, "-Z"), slices.Contains(c.Args, "-Y")
		}
	}
	return false, false
}

// missingReason is the Available reason when the kind's workload is absent.
func missingReason(kind cachev1alpha1.WorkloadKind) (reason, message string) {
	if kind == cachev1alpha1.WorkloadStatefulSet {
		return cachev1alpha1.ReasonStatefulSetMissing, "The StatefulSet of this Memcached does not exist"
	}
	return cachev1alpha1.ReasonDeploymentMissing, "The Deployment of this Memcached does not exist"
}
