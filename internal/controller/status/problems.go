package status

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// InvalidSpecError is a spec problem only the controller can see (the CRD
// cannot check it). It becomes a condition with reason InvalidSpec and a
// Warning on the transition, never a retried error: only a spec change
// helps.
type InvalidSpecError struct{ Msg string }

func (e *InvalidSpecError) Error() string { return e.Msg }

// APIErrorReason is the apiserver's reason for err (Forbidden,
// ServiceUnavailable, ...), never its message: what a tenant reads in a
// status must not carry what the apiserver said about other objects.
func APIErrorReason(err error) string {
	if r := apierrors.ReasonForError(err); r != "" {
		return string(r)
	}
	return "apiserver unreachable"
}

// SecretNotUsableMessage tells a tenant that the Secret name may not be
// used by kind (plural, "RebootPolicies") until it carries the consent
// label label=true. A missing and an unlabelled Secret get the same
// message, so that it reveals nothing about which Secrets exist.
func SecretNotUsableMessage(name, label, kind string) string {
	return fmt.Sprintf("Secret %s does not exist or is not labelled %s=true; whoever may edit Secrets in this namespace lets %s use it with: kubectl label secret %s %s=true",
		name, label, kind, name, label)
}

// InPhase names the phase of a reconcile an error came from, as
// "phase: err"; nil stays nil. Every controller's Reconcile returns its
// phases' errors this way.
func InPhase(phase string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", phase, err)
}
