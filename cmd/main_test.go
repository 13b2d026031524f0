package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestCacheOptions(t *testing.T) {
	cases := []struct {
		in      string
		want    []string // nil: every namespace
		wantErr string
	}{
		{in: "", want: nil},
		{in: " , ", want: nil},
		{in: "team-a", want: []string{"team-a"}},
		{in: "team-a, team-b,team-a", want: []string{"team-a", "team-b"}},
		{in: "Team-A", wantErr: `namespace "Team-A"`},
		{in: "a/b", wantErr: `namespace "a/b"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			opts, err := cacheOptions(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(maps.Keys(opts.DefaultNamespaces))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("namespaces = %v, want %v", got, tc.want)
			}
		})
	}
}
