package probe

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

func TestWorkerChangeBaselineFromStatus(t *testing.T) {
	spec := WorkerSpec{
		Key:      WorkerKey{Object: types.NamespacedName{Namespace: "ns", Name: "x"}, Policy: "q"},
		Hash:     "h1",
		Trigger:  autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{Query: "select 1", PeriodSeconds: 1, TimeoutSeconds: 1}},
		Baseline: PolicyState{Fingerprint: "abc", TriggerHash: "h1", LastResult: ok},
	}
	if st := newTriggerStateFor(spec); st.published.Fingerprint != "abc" {
		t.Fatalf("baseline not restored: %+v", st.published)
	}
	spec.Hash = "h2" // the query changed: the old baseline does not apply
	if st := newTriggerStateFor(spec); st.published.Fingerprint != "" {
		t.Fatalf("stale baseline kept after a trigger change: %+v", st.published)
	}
}

func TestWorkerSchedule(t *testing.T) {
	wk := &worker{spec: WorkerSpec{Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{PeriodSeconds: 2, TimeoutSeconds: 5, InitialDelaySeconds: 7}}}}
	period, timeout, delay := wk.schedule()
	if period != 2*time.Second || timeout != 2*time.Second || delay != 7*time.Second {
		t.Fatalf("schedule = %s %s %s (timeout must not exceed the period)", period, timeout, delay)
	}
}
