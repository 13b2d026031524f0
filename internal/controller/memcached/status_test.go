package memcached

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
)

func deploymentWith(gen, observed int64, st appsv1.DeploymentStatus) *workloadState {
	st.ObservedGeneration = observed
	return deploymentState(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: st})
}

func TestComputeStatusConditions(t *testing.T) {
	type conds struct{ available, progressing, degraded string }
	tests := []struct {
		name     string
		size     int32
		obs      observation
		want     conds // reasons
		wantAvl  metav1.ConditionStatus
		wantProg metav1.ConditionStatus
		wantDeg  metav1.ConditionStatus
	}{
		{
			name:    "all ready",
			size:    3,
			obs:     observation{workload: deploymentWith(2, 2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3})},
			want:    conds{cachev1alpha1.ReasonAllInstancesAvailable, cachev1alpha1.ReasonRolloutComplete, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionTrue, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionFalse,
		},
		{
			name:    "just created: nothing observed yet",
			size:    3,
			obs:     observation{workload: deploymentWith(1, 0, appsv1.DeploymentStatus{})},
			want:    conds{cachev1alpha1.ReasonInstancesUnavailable, cachev1alpha1.ReasonScalingUp, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionTrue, wantDeg: metav1.ConditionFalse,
		},
		{
			name:    "pods exist, not ready",
			size:    3,
			obs:     observation{workload: deploymentWith(1, 1, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1})},
			want:    conds{cachev1alpha1.ReasonInstancesUnavailable, cachev1alpha1.ReasonWaitingForReadiness, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionTrue, wantDeg: metav1.ConditionFalse,
		},
		{
			name:    "config rollout: old pods still serve",
			size:    3,
			obs:     observation{workload: deploymentWith(3, 3, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3})},
			want:    conds{cachev1alpha1.ReasonAllInstancesAvailable, cachev1alpha1.ReasonRollingOut, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionTrue, wantProg: metav1.ConditionTrue, wantDeg: metav1.ConditionFalse,
		},
		{
			name:    "scaling down",
			size:    2,
			obs:     observation{workload: deploymentWith(4, 4, appsv1.DeploymentStatus{Replicas: 5, UpdatedReplicas: 5, ReadyReplicas: 5, AvailableReplicas: 5})},
			want:    conds{cachev1alpha1.ReasonAllInstancesAvailable, cachev1alpha1.ReasonScalingDown, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionTrue, wantProg: metav1.ConditionTrue, wantDeg: metav1.ConditionFalse,
		},
		{
			name:    "parked",
			size:    0,
			obs:     observation{workload: deploymentWith(5, 5, appsv1.DeploymentStatus{})},
			want:    conds{cachev1alpha1.ReasonParked, cachev1alpha1.ReasonParked, cachev1alpha1.ReasonAsExpected},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionFalse,
		},
		{
			name: "rollout stuck",
			size: 2,
			obs: observation{workload: deploymentWith(2, 2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}})},
			want:    conds{cachev1alpha1.ReasonInstancesUnavailable, cachev1alpha1.ReasonProgressDeadlineExceeded, cachev1alpha1.ReasonRolloutStuck},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionTrue,
		},
		{
			name: "replica failure (e.g. quota)",
			size: 2,
			obs: observation{workload: deploymentWith(1, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "exceeded quota"}}})},
			want:    conds{cachev1alpha1.ReasonInstancesUnavailable, cachev1alpha1.ReasonScalingUp, cachev1alpha1.ReasonReplicaFailure},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionTrue, wantDeg: metav1.ConditionTrue,
		},
		{
			name:    "foreign Deployment",
			size:    1,
			obs:     observation{foreign: []string{"Deployment ns/x"}},
			want:    conds{cachev1alpha1.ReasonDeploymentMissing, cachev1alpha1.ReasonBlocked, cachev1alpha1.ReasonForeignObject},
			wantAvl: metav1.ConditionFalse, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionTrue,
		},
		{
			name:    "invalid spec keeps reporting the running pods",
			size:    1,
			obs:     observation{invalid: errors.New("bad"), workload: deploymentWith(1, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1})},
			want:    conds{cachev1alpha1.ReasonAllInstancesAvailable, cachev1alpha1.ReasonBlocked, cachev1alpha1.ReasonInvalidSpec},
			wantAvl: metav1.ConditionTrue, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionTrue,
		},
		{
			name:    "apply failed",
			size:    1,
			obs:     observation{applyErr: errors.New("forbidden"), workload: deploymentWith(1, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1})},
			want:    conds{cachev1alpha1.ReasonAllInstancesAvailable, cachev1alpha1.ReasonRolloutComplete, cachev1alpha1.ReasonApplyFailed},
			wantAvl: metav1.ConditionTrue, wantProg: metav1.ConditionFalse, wantDeg: metav1.ConditionTrue,
		},
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 7}}
			obs := tt.obs
			obs.generation, obs.size = mc.Generation, tt.size
			st := computeStatus(mc, obs, now)
			check := func(typ, reason string, status metav1.ConditionStatus) {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Fatalf("condition %s missing", typ)
				}
				if c.Reason != reason || c.Status != status {
					t.Errorf("%s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
				}
				if c.ObservedGeneration != 7 {
					t.Errorf("%s observedGeneration = %d, want 7", typ, c.ObservedGeneration)
				}
			}
			check(cachev1alpha1.ConditionAvailable, tt.want.available, tt.wantAvl)
			check(cachev1alpha1.ConditionProgressing, tt.want.progressing, tt.wantProg)
			check(cachev1alpha1.ConditionDegraded, tt.want.degraded, tt.wantDeg)
			if st.ObservedGeneration != 7 {
				t.Errorf("observedGeneration = %d", st.ObservedGeneration)
			}
		})
	}
}

func TestComputeStatusIsStable(t *testing.T) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 2}}
	obs := observation{
		generation:  mc.Generation,
		size:        2,
		workload:    deploymentWith(1, 1, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}),
		serviceName: "c",
		servers:     []string{"10.0.0.1:11211", "10.0.0.2:11211"},
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := computeStatus(mc, obs, t0)
	if first.Replicas != 2 || first.ReadyReplicas != 2 || first.ServiceName != "c" || len(first.Servers) != 2 {
		t.Fatalf("unexpected status %+v", first)
	}
	if want := "app.kubernetes.io/instance=c,app.kubernetes.io/managed-by=runbook,app.kubernetes.io/name=memcached"; first.Selector != want {
		t.Errorf("selector = %q, want %q", first.Selector, want)
	}
	mc.Status = first
	// An hour later, with nothing changed, the status is identical:
	// transition times only move when a condition's status does.
	second := computeStatus(mc, obs, t0.Add(time.Hour))
	for i := range second.Conditions {
		if !second.Conditions[i].LastTransitionTime.Equal(&first.Conditions[i].LastTransitionTime) {
			t.Errorf("condition %s transition time moved", second.Conditions[i].Type)
		}
	}
	// One instance goes unready: Available flips and gets a new time.
	obs.workload.available = 1
	third := computeStatus(mc, obs, t0.Add(2*time.Hour))
	avail := meta.FindStatusCondition(third.Conditions, cachev1alpha1.ConditionAvailable)
	if avail.Status != metav1.ConditionFalse || !avail.LastTransitionTime.Time.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("Available = %+v, want False at t0+2h", avail)
	}
}
