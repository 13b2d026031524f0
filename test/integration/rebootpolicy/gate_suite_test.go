package rebootpolicy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	rbpcontroller "github.com/runbook-dev/runbook/internal/controller/rebootpolicy"
)

// fakeClockLabel marks the RebootPolicies a fake-clock manager reconciles.
const fakeClockLabel = "fakeclock"

// fakeClockManager runs a second manager in this process whose clock the
// test steps, for the RebootPolicies of ns labelled for it. Its clock
// starts a minute ahead of the apiserver's, so that the targets' creation
// (a real time) precedes every trigger.
func fakeClockManager(t *testing.T, ns string) (*clocktesting.FakeClock, *prometheus.Registry) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Minute))
	reg := prometheus.NewRegistry()
	metrics := rbpcontroller.NewMetrics()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	startSecondManager(t, ns, fakeClockLabel, rbpcontroller.Options{
		Limits:  rbpcontroller.Limits{MinPeriod: time.Second},
		Clock:   clk,
		Metrics: metrics,
	})
	return clk, reg
}

// gauge reads a gauge (0 when absent) from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			if g := mf.GetMetric()[0].GetGauge(); g != nil {
				return g.GetValue()
			}
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// setAnnotation merge-patches one annotation of the RebootPolicy as the
// field manager owner (the plugin's way).
func setAnnotation(t *testing.T, ns, name, key, value, owner string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Patch(context.Background(), rbp, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(owner)); err != nil {
		t.Fatal(err)
	}
}

// markNeverAvailable writes what the Deployment controller writes while a
// rollout's new pods never become ready: every replica on the new
// template, none available, the Progressing condition still True.
func markNeverAvailable(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	n := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, UnavailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
}

// markAvailable writes the status of a finished rollout, as the
// Deployment controller does once the new pods are available.
func markAvailable(t *testing.T, dep *appsv1.Deployment, at time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	n := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
			LastUpdateTime: metav1.Time{Time: at}, LastTransitionTime: metav1.Time{Time: at}}}}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func reasonOf(t *testing.T, ns, name, typ string) string {
	c := condition(getRBP(t, ns, name), typ)
	if c == nil {
		return ""
	}
	return c.Reason
}
