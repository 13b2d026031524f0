package rebootpolicy

import (
	"reflect"
	"testing"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// Every transition of a policy gets at most one event per pass; a failure
// that fires is one Triggered warning carrying the probe's message.
func TestPolicyNotesOnePerTransition(t *testing.T) {
	const msg = "HTTP probe failed with statuscode: 503"
	ok := autorebootv1alpha1.PolicyStatus{Name: "health", LastResult: autorebootv1alpha1.ResultSuccess}
	failing := autorebootv1alpha1.PolicyStatus{Name: "health", LastResult: autorebootv1alpha1.ResultFailure, Message: msg}
	fired := failing
	fired.PendingTrigger = true
	changed := autorebootv1alpha1.PolicyStatus{Name: "health", LastResult: autorebootv1alpha1.ResultSuccess, Message: "query result changed", PendingTrigger: true}
	missing := autorebootv1alpha1.PolicyStatus{Name: "health", LastResult: autorebootv1alpha1.ResultError,
		Reason: autorebootv1alpha1.ReasonReferenceNotFound, Message: "ConfigMap app-config not found"}

	for _, tc := range []struct {
		name     string
		was, cur autorebootv1alpha1.PolicyStatus
		want     []policyNote
	}{
		{"steady success", ok, ok, nil},
		{"fails below its threshold", ok, failing, []policyNote{
			{true, autorebootv1alpha1.EventProbeFailed, "Probe", "policy health: " + msg}}},
		{"fails and fires in one pass", ok, fired, []policyNote{
			{true, autorebootv1alpha1.EventTriggered, "Trigger", "policy health fired on a failed probe: " + msg}}},
		{"fires after an earlier failure was reported", failing, fired, []policyNote{
			{false, autorebootv1alpha1.EventTriggered, "Trigger", "policy health fired: " + msg}}},
		{"a change fires", ok, changed, []policyNote{
			{false, autorebootv1alpha1.EventTriggered, "Trigger", "policy health fired: query result changed"}}},
		{"still failing and pending", fired, fired, nil},
		{"a reference goes missing", ok, missing, []policyNote{
			{true, autorebootv1alpha1.EventReferenceMissing, "Trigger", "policy health: ConfigMap app-config not found"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := &autorebootv1alpha1.RebootPolicy{Status: autorebootv1alpha1.RebootPolicyStatus{Policies: []autorebootv1alpha1.PolicyStatus{tc.was}}}
			cur := &autorebootv1alpha1.RebootPolicy{Status: autorebootv1alpha1.RebootPolicyStatus{Policies: []autorebootv1alpha1.PolicyStatus{tc.cur}}}
			if got := policyNotes(old, cur); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("notes\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
