package probe

import (
	"cmp"
	"strings"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// PolicyState is what a worker publishes about its policy. It only changes
// on transitions, so copying it into status writes only when something
// happened.
type PolicyState struct {
	LastResult          string
	Reason              string
	Message             string
	ConsecutiveFailures int32
	Fingerprint         string
	TriggerHash         string
	// FireSeq counts the times the trigger fired since the worker started;
	// FiredAt is the time of the last one.
	FireSeq uint64
	FiredAt time.Time
	// Change names the ConfigMaps, Secrets and keys the last fire (and
	// those merged into it) was about; empty when unknown (probes, sql).
	Change string
	// Targets are a referenced trigger's per-target baselines. The map is
	// replaced, never modified, so published copies can share it.
	Targets map[string]TargetState
}

// TargetState is the baseline of one target of a referenced trigger.
// FireSeq is the policy's FireSeq of the target's last fire (0: none).
type TargetState struct {
	References  string
	Fingerprint string
	FireSeq     uint64
	FiredAt     time.Time
	// Change names what the target's last fire was about.
	Change string
}

// triggerKind tells how observations turn into decisions.
type triggerKind int

const (
	// thresholdTrigger fires after failureThreshold consecutive failures
	// (probes).
	thresholdTrigger triggerKind = iota
	// changeTrigger fires when the fingerprint differs from the baseline
	// (sql and watch); the first observation only records the baseline.
	changeTrigger
	// referencedTrigger fires per target whose referenced data changed.
	referencedTrigger
)

// triggerState turns a stream of observations into transitions and fires,
// like the kubelet prober's result counters. Live counters stay in memory;
// only transitions are published.
type triggerState struct {
	kind             triggerKind
	failureThreshold int32
	successThreshold int32

	failures  int32
	successes int32

	// merging: a fire now would merge into a restart already due for this
	// policy (the last fire is not in status yet, or status holds it
	// pending). A threshold trigger then only starts a fresh count: the
	// fire would change nothing in status, and telling the controller
	// about it costs a reconcile (and often a read) per period while the
	// restart is carried out.
	merging bool

	published PolicyState
}

func newTriggerState(kind triggerKind, failureThreshold, successThreshold int32, baseline PolicyState) *triggerState {
	if failureThreshold < 1 {
		failureThreshold = 3
	}
	if successThreshold < 1 {
		successThreshold = 1
	}
	return &triggerState{kind: kind, failureThreshold: failureThreshold, successThreshold: successThreshold, published: baseline}
}

// observe records one observation and reports whether the published state
// changed (a transition or a fire).
func (t *triggerState) observe(o Observation, now time.Time) bool {
	if o.Result == autorebootv1alpha1.ResultError {
		t.failures, t.successes = 0, 0
		if t.published.LastResult == autorebootv1alpha1.ResultError && t.published.Reason == o.Reason {
			return false
		}
		t.published.LastResult = autorebootv1alpha1.ResultError
		t.published.Reason = o.Reason
		t.published.Message = Truncate(o.Message, 256)
		t.published.ConsecutiveFailures = 0
		return true
	}
	switch t.kind {
	case changeTrigger:
		return t.observeChange(o, now)
	case referencedTrigger:
		return t.observeReferenced(o, now)
	}
	return t.observeProbe(o, now)
}

func (t *triggerState) observeProbe(o Observation, now time.Time) bool {
	p := &t.published
	switch o.Result {
	case autorebootv1alpha1.ResultFailure:
		t.successes = 0
		t.failures++
		if t.failures >= t.failureThreshold && t.merging {
			// Like after a fire, the next one needs fresh failures.
			changed := t.noteFailure(o)
			t.failures = 0
			return changed
		}
		if t.failures >= t.failureThreshold {
			p.FireSeq++
			p.FiredAt = now
			p.LastResult = autorebootv1alpha1.ResultFailure
			p.Reason = ""
			p.ConsecutiveFailures = t.failures
			p.Message = Truncate(o.Message, 256)
			// Like the kubelet after a liveness kill: the next fire needs
			// failureThreshold fresh failures.
			t.failures = 0
			return true
		}
		return t.noteFailure(o)
	default:
		t.failures = 0
		t.successes++
		if p.LastResult == autorebootv1alpha1.ResultSuccess {
			return false
		}
		// From Failure, successThreshold successes are needed; from
		// unknown or Error the first success counts.
		if p.LastResult == autorebootv1alpha1.ResultFailure && t.successes < t.successThreshold {
			return false
		}
		p.LastResult = autorebootv1alpha1.ResultSuccess
		p.Reason, p.Message = "", ""
		p.ConsecutiveFailures = 0
		return true
	}
}

// noteFailure publishes a failure that does not fire: only the first of a
// run is a transition.
func (t *triggerState) noteFailure(o Observation) bool {
	p := &t.published
	if p.LastResult == autorebootv1alpha1.ResultFailure {
		return false
	}
	p.LastResult = autorebootv1alpha1.ResultFailure
	p.Reason = ""
	p.ConsecutiveFailures = t.failures
	p.Message = Truncate(o.Message, 256)
	return true
}

func (t *triggerState) observeChange(o Observation, now time.Time) bool {
	p := &t.published
	switch {
	// A baseline of another key (the key Secret was replaced, or status
	// comes from a manager that did not key fingerprints) cannot be
	// compared: record a new one rather than fire on every upgrade.
	case p.Fingerprint == "", !fingerprint.SameKey(p.Fingerprint, o.Fingerprint):
		p.Fingerprint = o.Fingerprint
		p.LastResult = autorebootv1alpha1.ResultSuccess
		p.Reason = ""
		p.Message = "baseline recorded"
		return true
	case o.Fingerprint != p.Fingerprint:
		change := o.Change.Since(p.Fingerprint)
		p.Fingerprint = o.Fingerprint
		p.FireSeq++
		p.FiredAt = now
		p.LastResult = autorebootv1alpha1.ResultChanged
		p.Reason = ""
		p.Message = "changed since the last Observation"
		if change != "" {
			p.Message = Truncate(change, 256)
		}
		p.Change = t.addChange(p.Change, change)
		return true
	case p.LastResult != autorebootv1alpha1.ResultSuccess:
		p.LastResult = autorebootv1alpha1.ResultSuccess
		p.Reason = ""
		p.Message = "unchanged"
		return true
	}
	return false
}

// addChange is the change description of a fire: while an earlier fire
// still waits to be recorded or carried out (merging), both are named.
func (t *triggerState) addChange(prev, cur string) string {
	if t.merging {
		return MergeChange(prev, cur)
	}
	return Truncate(cur, MaxChangeText)
}

// Truncate cuts s to at most n bytes.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// observeReferenced compares each target's fingerprint with its baseline.
// A target seen for the first time, one whose template references
// something else now, or one whose baseline has another key only records
// a baseline: a template change rolls the pods anyway.
func (t *triggerState) observeReferenced(o Observation, now time.Time) bool {
	p := &t.published
	next := make(map[string]TargetState, len(o.Targets))
	changed, fired := len(p.Targets) != len(o.Targets), false
	var changes []string
	for _, to := range o.Targets {
		prev, ok := p.Targets[to.Name]
		ts := TargetState{References: to.References, Fingerprint: to.Fingerprint}
		switch {
		case !ok || prev.References != to.References || !fingerprint.SameKey(prev.Fingerprint, to.Fingerprint):
			changed = true
		case prev.Fingerprint != to.Fingerprint:
			p.FireSeq++
			ts.FireSeq, ts.FiredAt = p.FireSeq, now
			// Merged with an earlier pending fire of the target in status
			// (mergeTargets): merging here could revive the change of a
			// fire whose restart is done.
			ts.Change = Truncate(cmp.Or(to.Change.Since(prev.Fingerprint), "referenced data changed"), MaxChangeText)
			changes = appendOnce(changes, ts.Change)
			changed, fired = true, true
		default:
			ts.FireSeq, ts.FiredAt, ts.Change = prev.FireSeq, prev.FiredAt, prev.Change
		}
		next[to.Name] = ts
	}
	if changed {
		p.Targets = next
	}
	result := autorebootv1alpha1.ResultSuccess
	msg := Truncate(o.Message, 256)
	if fired {
		result = autorebootv1alpha1.ResultChanged
		p.FiredAt = now
		msg = Truncate(strings.Join(changes, "; ")+"; "+o.Message, 256)
	}
	if p.LastResult != result || p.Reason != o.Reason || p.Message != msg {
		p.LastResult, p.Reason, p.Message = result, o.Reason, msg
		changed = true
	}
	p.ConsecutiveFailures = 0
	return changed
}
