package nsscaler

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// Every GitOps event of a pass waits for the batch's Flush, which the
// reconcile calls after its status write, so that a reader who sees the
// event finds the status that goes with it.
func TestGitOpsEventsWaitForTheStatusWrite(t *testing.T) {
	ref := gitOpsRef{kind: gitOpsKustomization, key: types.NamespacedName{Namespace: "flux-system", Name: "apps"}}
	cases := []struct {
		name   string
		obs    gitOpsObservation
		reason string
	}{
		{"paused", gitOpsObservation{paused: []gitOpsRef{ref}}, scalingv1alpha1.EventGitOpsPaused},
		{"resumed", gitOpsObservation{resumed: []gitOpsRef{ref}}, scalingv1alpha1.EventGitOpsResumed},
		{"resumed by someone while parked, paused again", gitOpsObservation{repaused: []gitOpsRef{ref}}, scalingv1alpha1.EventGitOpsRepaused},
		{"failed", gitOpsObservation{errs: []error{errors.New("conflict")}}, scalingv1alpha1.EventGitOpsFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			r := &Reconciler{events: status.Events{Recorder: rec}}
			ev := r.events.Batch()
			r.emitGitOpsEvents(&scalingv1alpha1.NSScaler{}, ev, &tc.obs)
			if len(rec.Events) != 0 {
				t.Fatalf("recorded before the status write: %q", <-rec.Events)
			}
			ev.Flush()
			if len(rec.Events) != 1 {
				t.Fatalf("%d events after Flush, want 1", len(rec.Events))
			}
			if got := <-rec.Events; !strings.Contains(got, " "+tc.reason+" ") {
				t.Fatalf("event %q, want reason %s", got, tc.reason)
			}
		})
	}
}
