package fingerprint

import (
	"crypto/hmac"
	"encoding/binary"
	"sort"
)

// MaxDigestedKeys is the most keys of one object that get a digest of
// their own. A ConfigMap of up to 1 MiB can have over a hundred thousand
// keys; beyond this bound a change is still detected (by the object's
// fingerprint) but which keys changed is not said.
const MaxDigestedKeys = 16384

// digestSize is the length kept of each key's HMAC. A digest only names
// which keys changed (the decision to fire is the full fingerprint's), so
// a collision could at worst leave one changed key unnamed.
const digestSize = 16

// KeyDigests are the per-key digests of one version of an object's data.
// They live in the manager's memory only (never in status): together with
// the key names they let a later version's digests name the keys that
// changed, were added or were removed, without keeping any value. They are
// immutable once made and may be shared between readers.
type KeyDigests struct {
	// names are sorted; sums[i] is the digest of names[i]'s value.
	names []string
	sums  [][digestSize]byte
	// untracked: the object had more than MaxDigestedKeys keys.
	untracked bool
}

// Digests returns the per-key digests of data: of every key when keys is
// empty, else of those of keys present in data.
func (k *Key) Digests(data map[string][]byte, keys []string) *KeyDigests {
	var names []string
	if len(keys) == 0 {
		names = make([]string, 0, len(data))
		for name := range data {
			names = append(names, name)
		}
	} else {
		for _, name := range keys {
			if _, ok := data[name]; ok {
				names = append(names, name)
			}
		}
	}
	if len(names) > MaxDigestedKeys {
		return &KeyDigests{untracked: true}
	}
	sort.Strings(names)
	d := &KeyDigests{names: names, sums: make([][digestSize]byte, len(names))}
	h := k.New()
	var hdr [8]byte
	for i, name := range names {
		h.Reset()
		// The name is part of the input: equal values under two keys get
		// unrelated digests.
		binary.BigEndian.PutUint64(hdr[:], uint64(len(name)))
		h.Write([]byte("runbook key digest\x00"))
		h.Write(hdr[:])
		h.Write([]byte(name))
		h.Write(data[name])
		copy(d.sums[i][:], h.Sum(nil))
	}
	return d
}

// Untracked reports that the object had too many keys to digest each.
func (d *KeyDigests) Untracked() bool { return d != nil && d.untracked }

// Len is the number of digested keys.
func (d *KeyDigests) Len() int {
	if d == nil {
		return 0
	}
	return len(d.names)
}

// KeyDiff names the keys that differ between two versions of an object.
// Each list is sorted.
type KeyDiff struct {
	Changed, Added, Removed []string
	// Unknown: one of the versions had too many keys to tell.
	Unknown bool
}

// Empty reports whether nothing differs.
func (d KeyDiff) Empty() bool {
	return !d.Unknown && len(d.Changed) == 0 && len(d.Added) == 0 && len(d.Removed) == 0
}

// Diff compares prev with cur over the keys in sel (every key when sel is
// empty).
func Diff(prev, cur *KeyDigests, sel []string) KeyDiff {
	if prev == nil || cur == nil || prev.untracked || cur.untracked {
		return KeyDiff{Unknown: true}
	}
	var want map[string]bool
	if len(sel) > 0 {
		want = make(map[string]bool, len(sel))
		for _, s := range sel {
			want[s] = true
		}
	}
	in := func(name string) bool { return want == nil || want[name] }
	var d KeyDiff
	i, j := 0, 0
	for i < len(prev.names) || j < len(cur.names) {
		switch {
		case j == len(cur.names) || (i < len(prev.names) && prev.names[i] < cur.names[j]):
			if in(prev.names[i]) {
				d.Removed = append(d.Removed, prev.names[i])
			}
			i++
		case i == len(prev.names) || cur.names[j] < prev.names[i]:
			if in(cur.names[j]) {
				d.Added = append(d.Added, cur.names[j])
			}
			j++
		default:
			if in(cur.names[j]) && !hmac.Equal(prev.sums[i][:], cur.sums[j][:]) {
				d.Changed = append(d.Changed, cur.names[j])
			}
			i++
			j++
		}
	}
	return d
}

// Size estimates the bytes d holds.
func (d *KeyDigests) Size() int {
	n := 64
	for _, name := range d.names {
		n += len(name) + 16 + digestSize
	}
	return n
}
