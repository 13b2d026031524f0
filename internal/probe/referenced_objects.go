package probe

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// readObjects brings p.objects up to date for the objects in used.
func (p *referencedProber) readObjects(ctx context.Context, key *fingerprint.Key, used map[refKey][]reference, poll bool) *Observation {
	next := make(map[refKey]objectState, len(used))
	for k, refs := range used {
		st, err := p.readObject(ctx, key, k, refs, poll)
		if err != nil {
			return &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError,
				Message: fmt.Sprintf("reading %s %s failed (%s)", k.kind, k.name, status.APIErrorReason(err))}
		}
		next[k] = st
	}
	p.objects = next
	for k := range p.polled {
		if _, ok := used[k]; !ok {
			delete(p.polled, k)
		}
	}
	return nil
}

// readObject returns the state of one object: its version from the watch
// (or a metadata GET when polling is due), its data only when that version
// is new.
func (p *referencedProber) readObject(ctx context.Context, key *fingerprint.Key, k refKey, refs []reference, poll bool) (objectState, error) {
	prev, known := p.objects[k]
	sels := selections(refs)
	var m *metav1.PartialObjectMetadata
	var err error
	switch {
	case p.watcher.watches(k.kind):
		m, err = p.watcher.metadata(ctx, k)
	case known && !poll && p.clock.Since(p.polled[k]) < p.period:
		return prev, nil // not due: the last read stands
	default:
		m, err = p.reader.readMetadata(ctx, k)
		p.polled[k] = p.clock.Now()
	}
	if err != nil {
		return objectState{}, err
	}
	if k.kind == autorebootv1alpha1.WatchSecret && !p.settings.SecretsWithoutLabel &&
		(m == nil || m.Labels[autorebootv1alpha1.UsableLabel] != "true") {
		// Missing and unlabelled look the same: a policy must not tell
		// which Secrets exist.
		return objectState{notUsable: true}, nil
	}
	if m == nil {
		return objectState{missing: true}, nil
	}
	if known && prev.rv == m.ResourceVersion && hasAll(prev.fps, sels) {
		return prev, nil
	}
	return p.reader.fingerprints(ctx, key, k, m.ResourceVersion, sels)
}

func selections(refs []reference) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, selection(r))
	}
	sort.Strings(out)
	return out
}

func hasAll(fps map[string]string, sels []string) bool {
	for _, s := range sels {
		if _, ok := fps[s]; !ok {
			return false
		}
	}
	return true
}
