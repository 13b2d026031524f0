package cluster

import (
	"slices"
	"testing"
)

func TestNotEstablished(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want []string
	}{
		{"", nil},
		{"a.x=True\nb.x=True\n", nil},
		{"a.x=True\nb.x=\n", []string{"b.x"}},
		{"a.x=False\nb.x=True\nc.x=Unknown", []string{"a.x", "c.x"}},
	} {
		if got := notEstablished(tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("notEstablished(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}
