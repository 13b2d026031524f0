package fingerprint

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDiffNamesChangedAddedAndRemovedKeys(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	base := map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")}
	for _, tc := range []struct {
		name string
		cur  map[string][]byte
		sel  []string
		want KeyDiff
	}{
		{"unchanged", base, nil, KeyDiff{}},
		{"changed", map[string][]byte{"a": []byte("1"), "b": []byte("9"), "c": []byte("3")}, nil, KeyDiff{Changed: []string{"b"}}},
		{"added and removed", map[string][]byte{"a": []byte("1"), "b": []byte("2"), "d": nil}, nil,
			KeyDiff{Added: []string{"d"}, Removed: []string{"c"}}},
		{"empty value differs from absent", map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": {}}, nil, KeyDiff{Changed: []string{"c"}}},
		{"only the selection", map[string][]byte{"a": []byte("x"), "b": []byte("y")}, []string{"b", "c"},
			KeyDiff{Changed: []string{"b"}, Removed: []string{"c"}}},
		// The same value moving to another key is a change of both.
		{"values swapped", map[string][]byte{"a": []byte("2"), "b": []byte("1"), "c": []byte("3")}, nil, KeyDiff{Changed: []string{"a", "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(k.Digests(base, nil), k.Digests(tc.cur, nil), tc.sel)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Diff = %+v, want %+v", got, tc.want)
			}
			if got.Empty() != reflect.DeepEqual(tc.want, KeyDiff{}) {
				t.Fatalf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

func TestDigestsOfSelectedKeysOnly(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	d := k.Digests(map[string][]byte{"a": []byte("1"), "b": []byte("2")}, []string{"b", "missing"})
	if d.Len() != 1 {
		t.Fatalf("digested %d keys, want 1 (b)", d.Len())
	}
}

func TestDigestsOfTooManyKeysAreUntracked(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	big := make(map[string][]byte, MaxDigestedKeys+1)
	for i := range MaxDigestedKeys + 1 {
		big[fmt.Sprintf("k%05d", i)] = nil
	}
	d := k.Digests(big, nil)
	if !d.Untracked() || d.Len() != 0 {
		t.Fatalf("untracked %v, %d digests", d.Untracked(), d.Len())
	}
	if got := Diff(k.Digests(map[string][]byte{"a": nil}, nil), d, nil); !got.Unknown || got.Empty() {
		t.Fatalf("Diff against untracked = %+v", got)
	}
	if got := Diff(nil, d, nil); !got.Unknown {
		t.Fatalf("Diff without a previous version = %+v", got)
	}
}

// A digest is a keyed HMAC: without the key, a short value cannot be
// found by trying candidates, and the same value under two keys (or two
// manager keys) gives unrelated digests.
func TestKeyDigestsAreKeyedAndPerName(t *testing.T) {
	k := mustKey(t, "0123456789abcdef0123456789abcdef")
	other := mustKey(t, "fedcba9876543210fedcba9876543210")
	d := k.Digests(map[string][]byte{"pin": []byte("1234"), "pin2": []byte("1234")}, nil)
	if d.sums[0] == d.sums[1] {
		t.Fatal("equal values under two keys have equal digests")
	}
	if o := other.Digests(map[string][]byte{"pin": []byte("1234")}, nil); o.sums[0] == d.sums[0] {
		t.Fatal("another manager key gave the same digest")
	}
	if strings.Contains(string(d.sums[0][:]), "1234") {
		t.Fatal("the digest holds the value")
	}
}
