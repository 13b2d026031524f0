package probe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/controller/status"
)

// ReadUsableSecret reads a Secret of the policy's namespace live and
// returns it only when it opts in with UsableLabel. A missing Secret and
// one without the label give the same observation: a policy author who
// cannot read Secrets must not learn which ones exist, nor use one that
// its owner did not hand to Runbook.
func ReadUsableSecret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, *Observation) {
	var s corev1.Secret
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonProbeError,
			Message: fmt.Sprintf("reading Secret %s failed (%s)", name, status.APIErrorReason(err))}
	}
	if err != nil || s.Labels[autorebootv1alpha1.UsableLabel] != "true" {
		return nil, &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonSecretNotUsable,
			Message: status.SecretNotUsableMessage(name, autorebootv1alpha1.UsableLabel, "RebootPolicies")}
	}
	return &s, nil
}
