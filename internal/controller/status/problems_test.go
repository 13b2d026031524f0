package status

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAPIErrorReasonNeverCarriesTheMessage(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "other-teams-secret", errors.New("user cannot get"))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{forbidden, "Forbidden"},
		{apierrors.NewServiceUnavailable("etcd leader changed"), "ServiceUnavailable"},
		{errors.New("dial tcp 10.0.0.1:443: connection refused"), "apiserver unreachable"},
	} {
		if got := APIErrorReason(tc.err); got != tc.want {
			t.Errorf("APIErrorReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestSecretNotUsableMessageNamesTheLabelAndTheKind(t *testing.T) {
	msg := SecretNotUsableMessage("db", "cache.runbook.dev/usable", "Memcacheds")
	for _, want := range []string{"Secret db does not exist or is not labelled cache.runbook.dev/usable=true", "lets Memcacheds use it",
		"kubectl label secret db cache.runbook.dev/usable=true"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}

func TestInvalidSpecErrorIsFoundInAWrappedError(t *testing.T) {
	err := fmt.Errorf("settings: %w", &InvalidSpecError{Msg: "size 7 is outside 0..5"})
	var invalid *InvalidSpecError
	if !errors.As(err, &invalid) || invalid.Msg != "size 7 is outside 0..5" || err.Error() != "settings: size 7 is outside 0..5" {
		t.Fatalf("errors.As(%v) = %v", err, invalid)
	}
}

func TestInPhaseNamesThePhaseAndKeepsTheError(t *testing.T) {
	if InPhase("workloads", nil) != nil {
		t.Fatal("a nil error became an error")
	}
	inner := &InvalidSpecError{Msg: "bad"}
	err := InPhase("workloads", InPhase("decide", inner))
	var invalid *InvalidSpecError
	if err.Error() != "workloads: decide: bad" || !errors.As(err, &invalid) {
		t.Fatalf("%v", err)
	}
}
