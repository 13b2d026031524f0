package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
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
			opts, err := cacheOptions(tc.in, true)
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
			// WakeRequests stay cluster-wide: the NSScaler decides them in
			// every namespace it parks, watched or not.
			wide := false
			for obj, by := range opts.ByObject {
				if _, ok := obj.(*scalingv1alpha1.WakeRequest); ok {
					_, wide = by.Namespaces[cache.AllNamespaces]
				}
			}
			if wide != (len(tc.want) > 0) {
				t.Fatalf("WakeRequests cached in all namespaces: %v, want %v", wide, len(tc.want) > 0)
			}
			// Without the NSScaler controller the manager must start where
			// the scaling.runbook.dev CRDs are not installed.
			opts, err = cacheOptions(tc.in, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(opts.ByObject) != 0 {
				t.Fatalf("ByObject = %v without the NSScaler controller, want none", opts.ByObject)
			}
		})
	}
}
