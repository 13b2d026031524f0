package rebootpolicy

import (
	"fmt"
	"reflect"
	"strings"
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

// A pass's restarts are one Restarted event on the policy, which tells the
// fires of the same pass too; other transitions keep their own events.
func TestFoldRestarts(t *testing.T) {
	fired := policyNote{true, autorebootv1alpha1.EventTriggered, "Trigger", "policy health fired on a failed probe: 503"}
	changed := policyNote{false, autorebootv1alpha1.EventTriggered, "Trigger", "policy data fired: query result changed"}
	missing := policyNote{true, autorebootv1alpha1.EventReferenceMissing, "Trigger", "policy cfg: ConfigMap app not found"}
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("Deployment w-%d (health)", i)
	}
	for _, tc := range []struct {
		name     string
		notes    []policyNote
		restarts []string
		want     []policyNote
	}{
		{"no restart", []policyNote{fired}, nil, []policyNote{fired}},
		{"a restart of an earlier fire", nil, []string{"Deployment web (health)"}, []policyNote{
			{false, autorebootv1alpha1.EventRestarted, "Restart", "restarted Deployment web (health)"}}},
		{"fired and restarted in one pass", []policyNote{fired, missing}, []string{"Deployment web (health)"}, []policyNote{
			missing,
			{true, autorebootv1alpha1.EventRestarted, "Restart", "policy health fired on a failed probe: 503; restarted Deployment web (health)"}}},
		{"two fires, two targets", []policyNote{changed, fired}, []string{"Deployment a (data, health)", "Deployment b (data, health)"}, []policyNote{
			{true, autorebootv1alpha1.EventRestarted, "Restart",
				"policy data fired: query result changed; policy health fired on a failed probe: 503; restarted Deployment a (data, health), Deployment b (data, health)"}}},
		{"more targets than one event lists", nil, many, []policyNote{
			{false, autorebootv1alpha1.EventRestarted, "Restart", "restarted " + strings.Join(many[:maxListedRestarts], ", ") + " and 2 more"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := foldRestarts(tc.notes, tc.restarts); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("notes\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
