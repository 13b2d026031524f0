package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// wakeDecisionWait is how long wake waits for the NSScaler to decide on a
// WakeRequest before saying it is still pending.
const wakeDecisionWait = 30 * time.Second

// wakeSomehow wakes ns the way the user may: by editing spec.wake of the
// NSScaler when they may patch it, else by creating a WakeRequest in the
// namespace (tenant self-service), and says which it did.
func (o *wakeOptions) wakeSomehow(cmd *cobra.Command, conn *connection, env *environment, ns string) error {
	cl, _, err := conn.resolve()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), wakeDecisionWait+15*time.Second)
	defer cancel()
	may, err := mayPatchScalers(ctx, cl, o.scaler)
	if err != nil {
		return err
	}
	if may {
		return o.edit(cmd, conn, env, ns, o.wake)
	}
	if o.scaler != "" {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: you may not patch NSScaler %s; --scaler is ignored: the NSScaler that parks %s decides\n", o.scaler, ns)
	}
	msg, err := o.request(ctx, cl, env, ns)
	if err != nil {
		return err
	}
	return printResult(cmd.OutOrStdout(), msg, o.suffix())
}

// mayPatchScalers asks the apiserver whether the user may patch the
// NSScaler name (any NSScaler when name is empty).
func mayPatchScalers(ctx context.Context, cl client.Client, name string) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: scalingv1alpha1.GroupVersion.Group, Resource: "nsscalers", Verb: "patch", Name: name,
		},
	}}
	if err := cl.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether you may patch NSScalers (SelfSubjectAccessReview): %w", err)
	}
	return review.Status.Allowed, nil
}

// request creates a WakeRequest for --for in ns and waits a while for the
// decision.
func (o *wakeOptions) request(ctx context.Context, cl client.Client, env *environment, ns string) (string, error) {
	wr := &scalingv1alpha1.WakeRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "wake-"},
		Spec:       scalingv1alpha1.WakeRequestSpec{Duration: &metav1.Duration{Duration: o.forD}},
	}
	opts := []client.CreateOption{client.FieldOwner(fieldOwner)}
	if o.isDryRun() {
		opts = append(opts, client.DryRunAll)
	}
	if err := cl.Create(ctx, wr, opts...); err != nil {
		return "", describeWriteError(err, "WakeRequest", ns, "wake-…")
	}
	how := fmt.Sprintf("you may not patch NSScalers, so wake asked with WakeRequest %s/%s", ns, wr.Name)
	if o.isDryRun() {
		return how + " (it would be decided by the NSScaler that parks the namespace)", nil
	}
	deadline := env.now().Add(wakeDecisionWait)
	for {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(wr), wr); err != nil {
			return "", describeGetError(err, "WakeRequest", ns, wr.Name)
		}
		if msg, done, err := wakeOutcome(wr, how); done {
			return msg, err
		}
		if !env.now().Before(deadline) {
			return fmt.Sprintf("%s; not decided yet: see `kubectl get wakerequest -n %s %s`", how, ns, wr.Name), nil
		}
		if err := env.sleep(ctx, env.pollInterval); err != nil {
			return "", err
		}
	}
}

// wakeOutcome turns a request's status into the command's answer: done
// once it is decided; a refusal is an error.
func wakeOutcome(wr *scalingv1alpha1.WakeRequest, how string) (string, bool, error) {
	var cond *metav1.Condition
	for i := range wr.Status.Conditions {
		if wr.Status.Conditions[i].Type == scalingv1alpha1.ConditionGranted {
			cond = &wr.Status.Conditions[i]
		}
	}
	if wr.Status.Phase == "" || cond == nil {
		return "", false, nil
	}
	switch wr.Status.Phase {
	case scalingv1alpha1.WakeRequestGranted:
		until := ""
		if wr.Status.GrantedUntil != nil {
			until = wr.Status.GrantedUntil.UTC().Format(time.RFC3339)
		}
		msg := fmt.Sprintf("namespace %s runs until %s: NSScaler %s granted it (%s)\n%s; delete it to park the namespace again",
			wr.Namespace, until, wr.Status.NSScaler, cond.Reason, how)
		if cond.Reason == scalingv1alpha1.ReasonWakeClipped {
			msg += "\nnote: " + cond.Message
		}
		return msg, true, nil
	default:
		return "", true, fmt.Errorf("%s; it was refused (%s): %s", how, cond.Reason, cond.Message)
	}
}
