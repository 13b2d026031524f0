package nsscaler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

func TestNamespaceEventsAreBounded(t *testing.T) {
	cases := []struct {
		name       string
		namespaces int
		want       []string
	}{
		{"three namespaces: one event each", 3, []string{
			"Normal NamespaceParked parked 2 workloads in namespace ns-00",
			"Normal NamespaceParked parked 2 workloads in namespace ns-01",
			"Normal NamespaceParked parked 2 workloads in namespace ns-02",
		}},
		{"500 namespaces: ten, then one summary", 500, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1000)
			r := &Reconciler{events: status.Events{Recorder: rec}}
			tallies := map[string]*namespaceTally{}
			for i := range tc.namespaces {
				tallies[fmt.Sprintf("ns-%02d", i)] = &namespaceTally{parked: 2}
			}
			tallies["untouched"] = &namespaceTally{}
			ev := r.events.Batch()
			r.emitNamespaceEvents(&scalingv1alpha1.NSScaler{}, ev, tallies)
			ev.Flush()
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if tc.want != nil {
				if !slices.Equal(got, tc.want) {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
				return
			}
			if len(got) != maxNamespaceEvents+1 {
				t.Fatalf("%d events, want %d:\n%s", len(got), maxNamespaceEvents+1, strings.Join(got, "\n"))
			}
			wantLast := fmt.Sprintf("Normal NamespaceParked parked %d workloads in %d more namespaces", 2*(tc.namespaces-maxNamespaceEvents), tc.namespaces-maxNamespaceEvents)
			if got[len(got)-1] != wantLast {
				t.Fatalf("summary %q, want %q", got[len(got)-1], wantLast)
			}
		})
	}
}
