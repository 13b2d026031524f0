package cluster

import (
	"slices"
	"testing"
)

func TestNotEstablished(t *testing.T) {
	for _, tc := range []struct {
		out        string
		names      []string
		wantWaited []string
	}{
		{"", nil, nil},
		{"a.x=True\nb.x=True\n", nil, nil},
		{"a.x=True\nb.x=\n", nil, []string{"b.x"}},
		{"a.x=False\nb.x=True\nc.x=Unknown", nil, []string{"a.x", "c.x"}},
		// Named CRDs: the others do not matter, a missing one is waited for.
		{"a.x=False\nb.x=True", []string{"b.x"}, nil},
		{"a.x=True", []string{"a.x", "b.x"}, []string{"b.x"}},
		{"", []string{"a.x"}, []string{"a.x"}},
	} {
		if got := notEstablished(tc.out, tc.names); !slices.Equal(got, tc.wantWaited) {
			t.Errorf("notEstablished(%q, %q) = %q, want %q", tc.out, tc.names, got, tc.wantWaited)
		}
	}
}
