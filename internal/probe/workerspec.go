package probe

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// WorkerKey identifies one policy of one RebootPolicy.
type WorkerKey struct {
	Object types.NamespacedName
	Policy string
}

func (k WorkerKey) String() string { return k.Object.String() + "/" + k.Policy }

// Metrics records what the workers do (the controller's collectors).
type Metrics interface {
	// ForType is the collectors of one trigger type, looked up once per
	// worker.
	ForType(triggerType string) TypeMetrics
	TriggerFired(triggerType string)
}

// TypeMetrics are the collectors of one trigger type.
type TypeMetrics interface {
	// Observe counts one result and its duration.
	Observe(result string, d time.Duration)
	// ObserveDrift records how late a probe started.
	ObserveDrift(d time.Duration)
}

// WorkerSpec is everything a worker needs; Hash covers the trigger, so an
// update of the RebootPolicy restarts only the workers whose trigger changed.
type WorkerSpec struct {
	Key     WorkerKey
	Hash    string
	Trigger autorebootv1alpha1.Trigger
	// Target is the RebootPolicy's target (referenced triggers read its
	// templates; it is part of Hash for them).
	Target autorebootv1alpha1.TargetRef
	// Baseline is the state recorded in status (fingerprint of sql/watch
	// triggers, per-target baselines of referenced ones), used when the
	// worker starts.
	Baseline PolicyState
}

// proberSpec is what the prober of s is built from.
func (s WorkerSpec) proberSpec() Spec {
	return Spec{Policy: s.Key.Object, Name: s.Key.Policy, Trigger: s.Trigger, Target: s.Target}
}

// WorkerView is a worker's published state as the reconciler sees it.
type WorkerView struct {
	Hash  string
	State PolicyState
	// Unacked is true when the last fire was not yet recorded in status.
	Unacked bool
	// AckedSeq is the last fire recorded in status: a referenced target
	// whose FireSeq is beyond it has a fire to record.
	AckedSeq uint64
	// Observed counts the observations the worker has fully handled
	// (published, and the controller notified of a transition): tests wait
	// on it rather than on the probe having started.
	Observed uint64
}
