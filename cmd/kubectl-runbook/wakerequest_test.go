package main

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// reviewAnswers answers SelfSubjectAccessReviews with allowed, recording
// what was asked; decide, when set, is the NSScaler's decision on a
// WakeRequest read back.
func reviewAnswers(allowed bool, asked *[]authorizationv1.ResourceAttributes, decide func(*scalingv1alpha1.WakeRequest)) *interceptor.Funcs {
	return &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if r, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				*asked = append(*asked, *r.Spec.ResourceAttributes)
				r.Status.Allowed = allowed
				return nil
			}
			if obj.GetName() == "" && obj.GetGenerateName() != "" {
				obj.SetName(obj.GetGenerateName() + "x7k2q")
			}
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if wr, ok := obj.(*scalingv1alpha1.WakeRequest); ok && decide != nil {
				decide(wr)
			}
			return nil
		},
	}
}

func granted(wr *scalingv1alpha1.WakeRequest) {
	until := metav1.NewTime(wakeNow.Add(time.Hour))
	wr.Status = scalingv1alpha1.WakeRequestStatus{Phase: scalingv1alpha1.WakeRequestGranted, NSScaler: "night", GrantedUntil: &until,
		Conditions: []metav1.Condition{{Type: scalingv1alpha1.ConditionGranted, Status: metav1.ConditionTrue, Reason: scalingv1alpha1.ReasonWakeGranted}}}
}

func refused(wr *scalingv1alpha1.WakeRequest) {
	wr.Status = scalingv1alpha1.WakeRequestStatus{Phase: scalingv1alpha1.WakeRequestRefused, NSScaler: "night",
		Conditions: []metav1.Condition{{Type: scalingv1alpha1.ConditionGranted, Status: metav1.ConditionFalse, Reason: scalingv1alpha1.ReasonOverLimit, Message: "3 grants in the last 24 hours"}}}
}

func TestMayPatchScalersAsksTheAPIServer(t *testing.T) {
	var asked []authorizationv1.ResourceAttributes
	cl := fakeClient(reviewAnswers(true, &asked, nil))
	ok, err := mayPatchScalers(context.Background(), cl, "night")
	if err != nil || !ok {
		t.Fatalf("allowed %v, %v", ok, err)
	}
	if len(asked) != 1 || asked[0].Verb != "patch" || asked[0].Resource != "nsscalers" || asked[0].Group != "scaling.runbook.dev" || asked[0].Name != "night" {
		t.Errorf("asked %+v", asked)
	}
}

func TestWakeByRequest(t *testing.T) {
	ctx := context.Background()
	o := &wakeOptions{writeOptions: writeOptions{dryRun: "none"}, forD: time.Hour}
	var asked []authorizationv1.ResourceAttributes

	cl := fakeClient(reviewAnswers(false, &asked, granted))
	msg, err := o.request(ctx, cl, testEnv(wakeNow), "proj-a")
	if err != nil || !strings.Contains(msg, "namespace proj-a runs until 2026-12-01T13:00:00Z: NSScaler night granted it (Granted)") ||
		!strings.Contains(msg, "wake asked with WakeRequest proj-a/wake-x7k2q") {
		t.Fatalf("granted: %q %v", msg, err)
	}
	var wr scalingv1alpha1.WakeRequest
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "proj-a", Name: "wake-x7k2q"}, &wr); err != nil || wr.Spec.Duration.Duration != time.Hour || wr.Spec.Until != nil {
		t.Errorf("the request: %+v %v", wr.Spec, err)
	}

	cl = fakeClient(reviewAnswers(false, &asked, refused))
	_, err = o.request(ctx, cl, testEnv(wakeNow), "proj-a")
	wantErr(t, err, "it was refused (OverLimit): 3 grants in the last 24 hours")

	cl = fakeClient(reviewAnswers(false, &asked, nil))
	msg, err = o.request(ctx, cl, testEnv(wakeNow), "proj-a")
	if err != nil || !strings.Contains(msg, "not decided yet: see `kubectl get wakerequest -n proj-a wake-x7k2q`") {
		t.Errorf("undecided: %q %v", msg, err)
	}
}
