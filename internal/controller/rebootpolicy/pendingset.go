package rebootpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// pendingEntry is one reason a target waits for a restart, as status
// records it.
type pendingEntry struct {
	// firedAt is when it was first seen (lastTriggerTime).
	firedAt time.Time
	// changedAt is when the latest change merged into it was seen: the
	// settle delay counts from it.
	changedAt time.Time
	// settles: subject to the settle delay (change triggers, not probes
	// and not a restart request).
	settles bool
}

// pendingWork is everything that waits for a restart, from status: fires
// of probe, sql and watch policies and a restart request are for every
// target; a referenced trigger's fires are for one target each.
type pendingWork struct {
	all      []pendingEntry
	byTarget map[string][]pendingEntry
}

// pendingFromStatus reads the pending work of rbp. changeTriggers names
// the policies whose fires settle.
func pendingFromStatus(rbp *autorebootv1alpha1.RebootPolicy) pendingWork {
	w := pendingWork{byTarget: map[string][]pendingEntry{}}
	settles := changePolicies(rbp)
	for _, ps := range rbp.Status.Policies {
		if ps.PendingTrigger {
			w.all = append(w.all, entryOf(ps.LastTriggerTime, ps.LastChangeTime, settles[ps.Name]))
		}
		for _, ts := range ps.Targets {
			if ts.PendingTrigger {
				w.byTarget[ts.Name] = append(w.byTarget[ts.Name], entryOf(ts.LastTriggerTime, ts.LastChangeTime, true))
			}
		}
	}
	if rbp.Status.RestartRequestPending {
		w.all = append(w.all, entryOf(rbp.Status.RestartRequestTime, nil, false))
	}
	return w
}

func entryOf(fired, changed *metav1.Time, settles bool) pendingEntry {
	e := pendingEntry{settles: settles}
	if fired != nil {
		e.firedAt = fired.Time
	}
	e.changedAt = e.firedAt
	if changed != nil && changed.After(e.changedAt) {
		e.changedAt = changed.Time
	}
	return e
}

// changePolicies are the policies of change triggers (their fires settle).
func changePolicies(rbp *autorebootv1alpha1.RebootPolicy) map[string]bool {
	out := map[string]bool{}
	for _, p := range rbp.Spec.Policies {
		if p.Trigger.SQL != nil || p.Trigger.Watch != nil || p.Trigger.Referenced != nil {
			out[p.Name] = true
		}
	}
	return out
}

// any reports whether anything waits.
func (w pendingWork) any() bool { return len(w.all) > 0 || len(w.byTarget) > 0 }

// forTarget is what target name waits for.
func (w pendingWork) forTarget(name string) []pendingEntry {
	if len(w.byTarget[name]) == 0 {
		return w.all
	}
	return append(append([]pendingEntry(nil), w.all...), w.byTarget[name]...)
}

// earliest is the first fire among entries.
func earliest(entries []pendingEntry) time.Time {
	var t time.Time
	for i, e := range entries {
		if i == 0 || e.firedAt.Before(t) {
			t = e.firedAt
		}
	}
	return t
}

// settledAt is the first moment one of entries may act: the zero time
// if one of them does not settle, else settle after its latest change.
func settledAt(entries []pendingEntry, settle time.Duration) time.Time {
	var at time.Time
	for i, e := range entries {
		t := e.changedAt.Add(settle)
		if !e.settles || settle <= 0 {
			t = time.Time{}
		}
		if i == 0 || t.Before(at) {
			at = t
		}
	}
	return at
}

// restartID names the pending work of every target: the RebootPolicy, and
// the pending policies with their persisted trigger times and
// fingerprints, and a pending restart request. It is computed from status
// as written (second-precision times), so a successor leader derives the
// same id and recognises a restart already made for it.
func restartID(rbp *autorebootv1alpha1.RebootPolicy) string {
	return rbp.Name + "/" + hex.EncodeToString(restartHash(rbp).Sum(nil)[:8])
}

func restartHash(rbp *autorebootv1alpha1.RebootPolicy) hash.Hash {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n", rbp.UID)
	for _, p := range rbp.Status.Policies {
		if !p.PendingTrigger {
			continue
		}
		_, _ = fmt.Fprintf(h, "%s\n%d\n%s\n", p.Name, unix(p.LastTriggerTime), p.Fingerprint)
	}
	if rbp.Status.RestartRequestPending {
		_, _ = fmt.Fprintf(h, "restart-request\n%s\n%d\n", rbp.Status.LastRestartRequest, unix(rbp.Status.RestartRequestTime))
	}
	return h
}

// targetRestartIDs names the pending work of each target: restartID, plus
// the target's own pending referenced changes (policy, trigger time,
// fingerprint) when it has any.
func targetRestartIDs(rbp *autorebootv1alpha1.RebootPolicy) map[string]string {
	type own struct {
		policy, fp string
		at         int64
	}
	byTarget := map[string][]own{}
	for _, p := range rbp.Status.Policies {
		for _, ts := range p.Targets {
			if ts.PendingTrigger {
				byTarget[ts.Name] = append(byTarget[ts.Name], own{p.Name, ts.Fingerprint, unix(ts.LastTriggerTime)})
			}
		}
	}
	out := map[string]string{"": restartID(rbp)}
	for name, owns := range byTarget {
		sort.Slice(owns, func(i, j int) bool { return owns[i].policy < owns[j].policy })
		h := restartHash(rbp)
		for _, o := range owns {
			_, _ = fmt.Fprintf(h, "target\n%s\n%s\n%d\n%s\n", name, o.policy, o.at, o.fp)
		}
		out[name] = rbp.Name + "/" + hex.EncodeToString(h.Sum(nil)[:8])
	}
	return out
}

// idFor picks a target's id from targetRestartIDs.
func idFor(ids map[string]string, name string) string {
	if id, ok := ids[name]; ok {
		return id
	}
	return ids[""]
}

func unix(t *metav1.Time) int64 {
	if t == nil {
		return 0
	}
	return t.Unix()
}

// clearDone clears what the restarts (or recognised restarts) of the named
// targets satisfied. A fire for every target stays pending until no
// target is left waiting for it (skipped or not yet restarted): the ids
// of the targets restarted for it so far depend on it staying.
func clearDone(st *autorebootv1alpha1.RebootPolicyStatus, satisfied map[string]bool, allSatisfied bool) {
	if allSatisfied {
		for i := range st.Policies {
			st.Policies[i].PendingTrigger = false
		}
		st.RestartRequestPending = false
	}
	if hasAllPending(st) {
		return
	}
	for i := range st.Policies {
		for j := range st.Policies[i].Targets {
			ts := &st.Policies[i].Targets[j]
			if ts.PendingTrigger && satisfied[ts.Name] {
				ts.PendingTrigger = false
			}
		}
	}
}

// hasAllPending: a fire for every target (a policy or a request) waits.
func hasAllPending(st *autorebootv1alpha1.RebootPolicyStatus) bool {
	if st.RestartRequestPending {
		return true
	}
	for _, p := range st.Policies {
		if p.PendingTrigger {
			return true
		}
	}
	return false
}
