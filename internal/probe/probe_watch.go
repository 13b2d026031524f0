package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
	"github.com/runbook-dev/runbook/internal/fingerprint"
)

// watchProber reads a ConfigMap or Secret live (get on the one object: no
// cluster-wide cache of Secrets) and fingerprints its data with the
// manager's key.
type watchProber struct {
	reader    client.Reader
	keys      *fingerprint.Source
	namespace string
	spec      autorebootv1alpha1.WatchTrigger

	// last and lastFP are the per-key digests and the fingerprint of the
	// data last read, to name the keys of the next change (memory only).
	last   *fingerprint.KeyDigests
	lastFP string
}

func newWatchProber(reader client.Reader, keys *fingerprint.Source, namespace string, spec autorebootv1alpha1.WatchTrigger) *watchProber {
	return &watchProber{reader: reader, keys: keys, namespace: namespace, spec: spec}
}

func (p *watchProber) Kind() string { return TypeWatch }
func (p *watchProber) Close()       {}

func (p *watchProber) Probe(ctx context.Context) Observation {
	key, err := p.keys.Key(ctx)
	if err != nil {
		return keyUnavailable()
	}
	data, o := p.read(ctx)
	if o != nil {
		return *o
	}
	fp := key.Sum(func(h hash.Hash) { writeData(h, data, p.spec.Keys) })
	return Observation{Result: autorebootv1alpha1.ResultSuccess, Fingerprint: fp, Change: p.noteChange(key, data, fp)}
}

// noteChange names the keys that differ from the data last read. Keys are
// digested only when the fingerprint moved (or on the first read, the base
// of the next change), not on every period.
func (p *watchProber) noteChange(key *fingerprint.Key, data map[string][]byte, fp string) ChangeNote {
	n := ChangeNote{What: string(p.spec.Kind) + " " + shownName(p.spec.Name)}
	if p.last != nil && fp == p.lastFP {
		return n
	}
	cur := key.Digests(data, p.spec.Keys)
	if p.last != nil && fingerprint.SameKey(p.lastFP, fp) {
		n.Base = p.lastFP
		n.Text = objectChange{kind: p.spec.Kind, name: p.spec.Name, keys: fingerprint.Diff(p.last, cur, nil)}.String()
	}
	p.last, p.lastFP = cur, fp
	return n
}

func (p *watchProber) read(ctx context.Context) (map[string][]byte, *Observation) {
	if p.spec.Kind == autorebootv1alpha1.WatchSecret {
		s, o := ReadUsableSecret(ctx, p.reader, p.namespace, p.spec.Name)
		if o != nil {
			return nil, o
		}
		return s.Data, nil
	}
	var cm corev1.ConfigMap
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: p.spec.Name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonWatchedNotFound,
				Message: fmt.Sprintf("ConfigMap %s not found", p.spec.Name)}
		}
		return nil, &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError,
			Message: fmt.Sprintf("reading ConfigMap %s failed (%s)", p.spec.Name, status.APIErrorReason(err))}
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

func keyUnavailable() Observation {
	return Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonFingerprintKeyUnavailable,
		Message: "the manager could not read or create its fingerprint key; see the manager's logs"}
}

// writeData writes the selected keys (all when keys is empty) to h, in
// order, length-prefixed; a missing key writes differently from an empty
// value.
func writeData(h hash.Hash, data map[string][]byte, keys []string) {
	if len(keys) == 0 {
		for k := range data {
			keys = append(keys, k)
		}
	} else {
		keys = append([]string(nil), keys...)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := data[k]
		var hdr [17]byte
		binary.BigEndian.PutUint64(hdr[0:], uint64(len(k)))
		if ok {
			hdr[8] = 1
		}
		binary.BigEndian.PutUint64(hdr[9:], uint64(len(v)))
		h.Write(hdr[:])
		h.Write([]byte(k))
		h.Write(v)
	}
}
