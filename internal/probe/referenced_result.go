package probe

import (
	"fmt"
	"hash"
	"strings"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// result fingerprints each target over its references, names what changed
// since before, and notes what is missing or not usable.
func (p *referencedProber) result(key *fingerprint.Key, targets []targetRefs, before map[refKey]objectState) Observation {
	o := Observation{Result: autorebootv1alpha1.ResultSuccess, Targets: make([]TargetObservation, 0, len(targets))}
	var missing, notUsable []string
	objects := 0
	for _, t := range targets {
		var counted []reference
		for _, r := range t.refs {
			st := p.objects[refKey{kind: r.kind, namespace: p.policy.Namespace, name: r.name}]
			switch {
			case st.notUsable:
				notUsable = appendOnce(notUsable, r.name)
				continue
			case st.missing && !r.optional:
				missing = appendOnce(missing, string(r.kind)+" "+r.name)
			}
			counted = append(counted, r)
		}
		objects += len(counted)
		fp := key.Sum(func(h hash.Hash) { p.writeTarget(h, counted) })
		o.Targets = append(o.Targets, TargetObservation{Name: t.name, References: referencesHash(counted), Fingerprint: fp,
			Change: p.noteChange(t.name, fp, counted, before)})
	}
	seen := make(map[string]string, len(o.Targets))
	for _, to := range o.Targets {
		seen[to.Name] = to.Fingerprint
	}
	p.seen = seen
	o.Message = fmt.Sprintf("tracking %d references of %d %s", objects, len(targets), targetNoun(p.target.Kind, len(targets)))
	switch {
	case len(notUsable) > 0:
		o.Reason = autorebootv1alpha1.ReasonSecretNotUsable
		o.Message += "; not tracked: Secret " + strings.Join(notUsable, ", ") +
			" (not labelled " + autorebootv1alpha1.UsableLabel + "=true or missing)"
	case len(missing) > 0:
		o.Reason = autorebootv1alpha1.ReasonReferenceNotFound
		o.Message += "; not found: " + strings.Join(missing, ", ")
	}
	return o
}

// noteChange names the objects and keys of refs that differ between
// before and now, relative to the target's fingerprint last seen. An
// object the prober did not know before leaves the change unnamed.
func (p *referencedProber) noteChange(target, fp string, refs []reference, before map[refKey]objectState) ChangeNote {
	n := ChangeNote{What: "referenced data"}
	base, ok := p.seen[target]
	if !ok || base == fp {
		return n
	}
	var cs []objectChange
	for _, r := range refs {
		k := refKey{kind: r.kind, namespace: p.policy.Namespace, name: r.name}
		prev, known := before[k]
		if !known || prev.notUsable {
			return n
		}
		c, changed, ok := objectDiff(r, prev, p.objects[k])
		if !ok {
			return n
		}
		if changed {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return n
	}
	n.Base, n.Text = base, describeChanges(cs)
	return n
}

// objectDiff is what changed in the keys r uses between two states of its
// object; ok is false when the states cannot tell.
func objectDiff(r reference, prev, cur objectState) (c objectChange, changed, ok bool) {
	c = objectChange{kind: r.kind, name: r.name}
	switch {
	case prev.missing && cur.missing:
		return c, false, true
	case prev.missing:
		c.created = true
		return c, true, true
	case cur.missing:
		c.deleted = true
		return c, true, true
	case prev.rv == cur.rv:
		return c, false, true
	case prev.keys == nil || cur.keys == nil:
		return c, false, false
	}
	var sel []string
	if !r.allKeys {
		sel = r.keys
	}
	c.keys = fingerprint.Diff(prev.keys, cur.keys, sel)
	return c, !c.keys.Empty(), true
}

func (p *referencedProber) writeTarget(h hash.Hash, refs []reference) {
	for _, r := range refs {
		st := p.objects[refKey{kind: r.kind, namespace: p.policy.Namespace, name: r.name}]
		h.Write([]byte(r.id()))
		h.Write([]byte{0})
		if st.missing {
			h.Write([]byte("missing"))
		} else {
			h.Write([]byte(st.fps[selection(r)]))
		}
		h.Write([]byte{0})
	}
}

func appendOnce(list []string, s string) []string {
	for _, e := range list {
		if e == s {
			return list
		}
	}
	return append(list, s)
}

func targetNoun(kind autorebootv1alpha1.TargetKind, n int) string {
	if n == 1 {
		return string(kind)
	}
	return string(kind) + "s"
}
